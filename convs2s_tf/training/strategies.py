"""Distribution strategies by name."""

from __future__ import annotations

import tensorflow as tf

STRATEGIES = ("mirrored", "multi_worker", "one_device")


def create_strategy(name: str = "mirrored") -> tf.distribute.Strategy:
    """Creates a `tf.distribute` strategy.

    Args:
        name: `"mirrored"` (all local GPUs, or the CPU), `"multi_worker"`
            (MultiWorkerMirroredStrategy, configured by the `TF_CONFIG` environment
            variable) or `"one_device"` (the first GPU, or the CPU).
    """
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multi_worker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "one_device":
        gpus = tf.config.list_logical_devices("GPU")
        return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
    raise ValueError(f"Unknown strategy {name!r}; choose one of {', '.join(STRATEGIES)}.")


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """Whether this process is the chief of `strategy`'s cluster (the one that writes
    the run directory): always outside multi-worker training."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    return resolver.task_type == "chief" or (
        resolver.task_type == "worker" and resolver.task_id == 0
    )
