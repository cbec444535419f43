"""Distribution strategies by name."""

from __future__ import annotations

from typing import Any

import tensorflow as tf
from tensorflow.python.distribute import collective_all_reduce_strategy

STRATEGIES = ("mirrored", "multi_worker", "one_device")


def create_strategy(name: str = "mirrored", cpu_replicas: int = 0) -> tf.distribute.Strategy:
    """Creates a `tf.distribute` strategy.

    Args:
        name: `"mirrored"` (all local GPUs, or the CPU), `"multi_worker"`
            (MultiWorkerMirroredStrategy, configured by the `TF_CONFIG` environment
            variable) or `"one_device"` (the first GPU, or the CPU).
        cpu_replicas: with 2 or more, split the CPU into that many logical devices and
            put one replica on each (mirrored and multi_worker): how a machine without
            GPUs runs, and tests, the several-replicas-per-worker path. Must come before
            TensorFlow runs its first operation.
    """
    if cpu_replicas > 1 and name in ("mirrored", "multi_worker"):
        _request_cpu_devices(cpu_replicas)
        if name == "multi_worker":
            # Its collectives must be set up before TensorFlow starts: nothing may run
            # (not even listing devices) before the strategy exists.
            return _multi_worker_on(cpu_replicas)
        return tf.distribute.MirroredStrategy(split_cpu(cpu_replicas))
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


def split_cpu(count: int) -> list[str]:
    """Splits the CPU into `count` logical devices; returns their names.

    Raises:
        ValueError: TensorFlow is already running with another number of CPU devices.
    """
    _request_cpu_devices(count)
    devices = [device.name for device in tf.config.list_logical_devices("CPU")]
    if len(devices) != count:
        raise ValueError(
            f"`cpu_replicas={count}` needs {count} logical CPU devices, but TensorFlow "
            f"already runs with {len(devices)}: split the CPU before anything runs."
        )
    return devices


def _request_cpu_devices(count: int) -> None:
    """Asks for `count` logical CPU devices (ignored once TensorFlow has started)."""
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(count)]
        )
    except RuntimeError:
        pass  # Already started: `split_cpu` checks it has the devices asked for.


def _multi_worker_on(count: int) -> tf.distribute.Strategy:
    """MultiWorkerMirroredStrategy with a replica on each of `count` logical CPUs.

    TensorFlow gives a worker without GPUs a single replica, on "CPU:0"; its cluster
    set-up has no public way to name local devices, so the one private method that
    lists them is replaced while the strategy is created.
    """
    extended = collective_all_reduce_strategy.CollectiveAllReduceExtended
    original = extended._initialize_local_devices

    def local_devices(
        self: Any, cluster_resolver: Any, worker_device: str
    ) -> tuple[tuple[str, ...], str]:
        names = tuple(f"{worker_device}/device:CPU:{i}" for i in range(count))
        return names, "CPU"

    setattr(extended, "_initialize_local_devices", local_devices)
    try:
        return tf.distribute.MultiWorkerMirroredStrategy()
    finally:
        setattr(extended, "_initialize_local_devices", original)
