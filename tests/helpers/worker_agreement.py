"""Subprocess: the workers' agreement check under a MirroredStrategy of 2 CPU replicas.

Each replica plays a worker: the first holds the chief's position (`CHIEF`), the second
another one. Prints one JSON line: for each position of the command line (JSON objects
with `step`, `epoch`, `epoch_batches` and `data`, a fingerprint), how many replicas the
all-reduce found to differ from the chief, and the line the second worker stops with
(None when it agrees).

Usage: python -m tests.helpers.worker_agreement POSITION_JSON...
"""

import json
import sys

import numpy as np
import tensorflow as tf

from convs2s_tf.training.coordination import (
    Coordinator,
    WorkersDisagreeError,
    fingerprint_number,
)
from convs2s_tf.training.strategies import create_strategy

CHIEF = {"step": 6, "epoch": 1, "epoch_batches": 2, "data": "fingerprint-a"}


def _numbers(position):
    return {**position, "data": fingerprint_number(position["data"])}


def _vector(position):
    return np.array(list(_numbers(position).values()), np.float64)


def _check(coordinator, strategy, position):
    """(replicas differing, the second worker's line or None) for `position`."""
    positions = [_vector(CHIEF), _vector(position)]
    values = strategy.experimental_distribute_values_from_function(
        lambda context: tf.constant(positions[context.replica_id_in_sync_group])
    )
    chief, differing = coordinator.disagreement(values)
    assert chief.tolist() == positions[0].tolist(), chief
    # The second worker's view of the same all-reduce: its own position, the chief's.
    worker = Coordinator(strategy)
    worker.disagreement = lambda values: (chief, differing)
    try:
        worker.check_workers_agree(_numbers(position))
    except WorkersDisagreeError as error:
        return differing, str(error)
    return differing, None


def main(positions):
    strategy = create_strategy("mirrored", cpu_replicas=2)
    coordinator = Coordinator(strategy)
    checked = [_check(coordinator, strategy, json.loads(position)) for position in positions]
    print(json.dumps([{"differing": d, "line": line} for d, line in checked]))


if __name__ == "__main__":
    main(sys.argv[1:])
