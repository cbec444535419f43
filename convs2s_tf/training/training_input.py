"""What the trainer reads (`TrainingInput`), and the run's shape it counts epochs for."""

from __future__ import annotations

from typing import Protocol

import tensorflow as tf

from convs2s_tf.data.pipeline.training import Placement
from convs2s_tf.training.coordination import cluster_size


def run_placement(strategy: tf.distribute.Strategy) -> Placement:
    """The run's shape: its workers and the replicas on each. (An epoch's step count is
    the same on every worker, so the trainer's placement is worker 0's.)"""
    num_workers = cluster_size(strategy)
    return Placement(
        num_workers=num_workers,
        worker=0,
        replicas_per_worker=strategy.num_replicas_in_sync // num_workers,
    )


class TrainingInput(Protocol):
    """What `Trainer.train` reads: per-replica batches for the whole run
    (`convs2s_tf.data.pipeline.TrainingData` is one)."""

    def steps_per_epoch(self, placement: Placement) -> int:
        """Steps of one epoch (the same on every worker)."""
        ...

    def dataset(
        self,
        input_context: tf.distribute.InputContext | None,
        first_epoch: int = 1,
        skip: int = 0,
    ) -> tf.data.Dataset:
        """This worker's batches from `first_epoch` on, past its first `skip`; each epoch
        `steps_per_epoch * replicas_per_worker` batches long."""
        ...
