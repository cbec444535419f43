"""What the workers of a run decide together: the chief's decisions, and preemption.

Every worker of a multi-worker run meets the others in each step's all-reduce, so a
decision taken by one worker alone (stop, anneal, a new best checkpoint) would leave the
others waiting or training with another learning rate. Decisions that need the clock or
the validation set are taken on the chief and broadcast (`Coordinator.from_chief`); a
SIGTERM on any worker is voted through the step's own all-reduce (`PreemptionWatch`
holds the vote), so every worker saves and stops at the same step. The phases outside
the step (validation, the final test evaluation) check for it between their batches
(`Preempted`).
"""

from __future__ import annotations

import hashlib
import signal
import threading
from collections.abc import Sequence
from types import FrameType
from typing import Any

import numpy as np
import tensorflow as tf

from convs2s_tf.runs import CheckpointError

# The exit status of a run stopped by SIGTERM after saving (128 + SIGTERM, as a shell
# reports a process killed by it): schedulers that restart on failure (Kubernetes, a
# Kubeflow TFJob's `ExitCode` policy) then restart the command, which resumes.
PREEMPTED_EXIT_STATUS = 128 + signal.SIGTERM


class WorkersDisagreeError(CheckpointError):
    """The workers of a run restored different steps, epoch positions or data."""


def fingerprint_number(fingerprint: str | None) -> float:
    """A data fingerprint as a float64 that all-reduces exactly (52 bits of its hash;
    0 for none)."""
    if not fingerprint:
        return 0.0
    return float(int(hashlib.sha256(fingerprint.encode("utf-8")).hexdigest()[:13], 16))


class Preempted(Exception):
    """A SIGTERM stopped a phase outside the training step (validation, the final test
    evaluation) between two of its batches."""


def cluster_size(strategy: tf.distribute.Strategy) -> int:
    """Returns the workers of `strategy`'s cluster (1 outside multi-worker training)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return 1
    spec = resolver.cluster_spec().as_dict()
    return max(1, len(spec.get("chief", [])) + len(spec.get("worker", [])))


class Coordinator:
    """Broadcasts the chief's values to every worker of `strategy` (a no-op on one).

    Args:
        strategy: the run's strategy.

    Example:
        coordinator = Coordinator(strategy)
        loss, stop = coordinator.from_chief([loss_on_chief, stop_on_chief])
    """

    def __init__(self, strategy: tf.distribute.Strategy) -> None:
        self.strategy = strategy
        self.multi_worker = cluster_size(strategy) > 1
        self._broadcast = tf.function(
            self._broadcast_fn, input_signature=[tf.TensorSpec([None], tf.float64)], autograph=False
        )

    def from_chief(self, values: Sequence[float]) -> np.ndarray:
        """Returns the chief's `values` on every worker (what others pass is ignored)."""
        array = np.asarray(values, np.float64)
        if not self.multi_worker:
            return array
        return self._broadcast(tf.constant(array)).numpy()

    def vote_round(self, chief_busy: bool, stop: bool) -> tuple[bool, bool]:
        """One all-reduce while the chief works alone (validation) and the others wait:
        whether the chief is still busy, and whether any worker was asked to stop.

        The chief calls it between its batches and once more, not busy, at the end;
        every other worker calls it until the chief is no longer busy, so the calls
        pair up and a SIGTERM on any worker reaches the chief within one batch.
        """
        sums = self._sum(tf.constant([float(chief_busy), float(stop)], tf.float64)).numpy()
        return bool(sums[0]), bool(sums[1])

    @tf.function(autograph=False)
    def _sum(self, values: tf.Tensor) -> tf.Tensor:
        per_replica = self.strategy.run(tf.identity, args=(values,))
        return self.strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    def disagreement(self, values: Any) -> tuple[np.ndarray, int]:
        """Compares every replica's `values` with the chief's (replica 0's) in one
        all-reduce.

        Args:
            values: A float64 vector: one tensor (every replica of this worker holds
                it), or per-replica values (`experimental_distribute_values_from_function`).

        Returns:
            (the chief's values, how many replicas hold other values), on every worker.
        """
        chief, differing = self._disagreement(values)
        local = self.strategy.experimental_local_results
        return local(chief)[0].numpy(), int(local(differing)[0].numpy())

    @tf.function(autograph=False)
    def _disagreement(self, values: Any) -> tuple[Any, Any]:
        def compare_with_first_replica(values: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            context = tf.distribute.get_replica_context()
            first = tf.cast(tf.equal(context.replica_id_in_sync_group, 0), tf.float64)
            chief = context.all_reduce(tf.distribute.ReduceOp.SUM, values * first)
            differs = tf.cast(tf.reduce_any(tf.not_equal(values, chief)), tf.float64)
            return chief, context.all_reduce(tf.distribute.ReduceOp.SUM, differs)

        return self.strategy.run(compare_with_first_replica, args=(values,))

    def check_workers_agree(self, position: dict[str, float]) -> None:
        """Stops every worker, with one line, unless all restored the same `position`
        (the chief's): before the first update, so that no worker trains from another
        step, epoch position or data than the others.

        Args:
            position: This worker's `step`, `epoch`, `epoch_batches` and `data` (a
                `fingerprint_number`).

        Raises:
            WorkersDisagreeError: on every worker, when any differs from the chief.
        """
        names = list(position)
        mine = np.array([position[name] for name in names], np.float64)
        chief, differing = self.disagreement(tf.constant(mine))
        if not differing:
            return
        theirs = dict(zip(names, chief))
        if np.array_equal(mine, chief):
            raise WorkersDisagreeError(
                f"{differing} replica(s) of other workers restored another step, epoch "
                f"position or prepared data than the chief ({_position(theirs)}): every "
                "worker must read the same run directory and data directory."
            )
        raise WorkersDisagreeError(
            f"This worker restored {_position(position)}, the chief {_position(theirs)}: "
            "every worker must read the same run directory and data directory."
        )

    def _broadcast_fn(self, values: tf.Tensor) -> tf.Tensor:
        def keep_on_first_replica(values: tf.Tensor) -> tf.Tensor:
            # Replica 0 of the sync group lives on the chief (worker 0).
            replica = tf.distribute.get_replica_context().replica_id_in_sync_group
            return values * tf.cast(tf.equal(replica, 0), tf.float64)

        per_replica = self.strategy.run(keep_on_first_replica, args=(values,))
        return self.strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)


class PreemptionWatch:
    """Turns SIGTERM into a vote that the training step all-reduces with its loss.

    While installed (a context manager, main thread only), SIGTERM sets `requested`; the
    trainer then sets `vote` (a variable every replica reads in its step), so the next
    step's reduced sums tell every worker that one of them must stop.

    With `raises`, SIGTERM also raises `Preempted` in the main thread (at once if it
    came before the watch was installed): for phases that run Python between their
    batches and need no vote, such as the chief's final test evaluation.

    Args:
        raises: Whether SIGTERM raises `Preempted`.
        requested: Whether a SIGTERM already came (e.g. to an earlier watch).

    Example:
        with PreemptionWatch() as watch:
            ...  # before each step: watch.update_vote(); after it: read the sums
    """

    def __init__(self, raises: bool = False, requested: bool = False) -> None:
        self.requested = requested
        self.raises = raises
        self.vote = tf.Variable(0.0, trainable=False, name="preemption_vote")
        # The handler SIGTERM had before (None: not installed).
        self._previous: Any = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True
        if self.raises:
            raise Preempted("SIGTERM")

    def update_vote(self) -> None:
        """Raises this worker's vote once SIGTERM has arrived."""
        if self.requested and not self.vote.numpy():
            self.vote.assign(1.0)

    def __enter__(self) -> PreemptionWatch:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._handle)
        if self.raises and self.requested:
            self.__exit__()
            raise Preempted("SIGTERM")
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
            self._previous = None


def _position(position: dict[str, float]) -> str:
    """A restored position as the agreement check's message names it."""
    data = int(position["data"])
    return (
        f"step {int(position['step'])}, epoch {int(position['epoch'])} "
        f"(+{int(position['epoch_batches'])} batches), data {data:013x}"
    )
