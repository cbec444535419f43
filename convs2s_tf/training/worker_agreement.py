"""Where the workers of a run meet outside the training step.

Inside the step, every worker meets the others in its all-reduce, which also carries the
SIGTERM vote (`PreemptionWatch`). Outside it there are two meetings: before the first
update, where every worker must have restored the same position of the same run
(`check_workers_agree_on_start`); and the chief's validation, which it runs alone while
the other workers wait in vote rounds (`ValidationVotes`), so that a SIGTERM on any
worker still reaches every worker within one validation batch.
"""

from __future__ import annotations

from convs2s_tf.training.coordination import Coordinator, PreemptionWatch, fingerprint_number
from convs2s_tf.training.training_state import TrainingState


def restored_position(state: TrainingState, data_fingerprint: str | None) -> dict[str, float]:
    """Where a worker resumes, as the workers compare it before the first update.

    Args:
        state: The worker's restored `TrainingState`.
        data_fingerprint: The prepared data's fingerprint (None: unknown).

    Returns:
        Its `step`, `epoch`, `epoch_batches` and `data` (a `fingerprint_number`), as
        floats that all-reduce exactly.
    """
    return {
        "step": float(state.step.numpy()),
        "epoch": float(state.epoch.numpy()),
        "epoch_batches": float(state.epoch_batches.numpy()),
        "data": fingerprint_number(data_fingerprint),
    }


def check_workers_agree_on_start(
    coordinator: Coordinator, state: TrainingState, data_fingerprint: str | None
) -> None:
    """Stops every worker, with one line, unless all restored the chief's position (a
    no-op on one worker).

    Args:
        coordinator: The run's `Coordinator`.
        state: This worker's restored `TrainingState`.
        data_fingerprint: The prepared data's fingerprint on this worker.

    Raises:
        WorkersDisagreeError: on every worker, when any differs from the chief.
    """
    if coordinator.multi_worker:
        coordinator.check_workers_agree(restored_position(state, data_fingerprint))


class ValidationVotes:
    """The vote rounds (`Coordinator.vote_round`) while the chief validates alone.

    The chief votes between its validation batches (`stop_requested`) and once more when
    done (`chief_done`); every other worker votes until the chief is done
    (`wait_for_chief`). The rounds pair up, so a SIGTERM on any worker abandons the
    chief's validation within a batch. On one worker there are no rounds: only its own
    SIGTERM counts.

    Args:
        coordinator: The run's `Coordinator`.
        preemption: This worker's `PreemptionWatch` (whether a SIGTERM came).
    """

    def __init__(self, coordinator: Coordinator, preemption: PreemptionWatch) -> None:
        self.coordinator = coordinator
        self.preemption = preemption

    def stop_requested(self) -> bool:
        """The chief's round between two validation batches: whether any worker was
        asked to stop (SIGTERM)."""
        if not self.coordinator.multi_worker:
            return self.preemption.requested
        return self.coordinator.vote_round(chief_busy=True, stop=self.preemption.requested)[1]

    def chief_done(self) -> None:
        """The chief's last round, not busy: it ends the others' `wait_for_chief`."""
        if self.coordinator.multi_worker:
            self.coordinator.vote_round(chief_busy=False, stop=self.preemption.requested)

    def wait_for_chief(self) -> None:
        """A worker's part of the chief's validation: votes until the chief is done."""
        while self.coordinator.vote_round(chief_busy=False, stop=self.preemption.requested)[0]:
            pass
