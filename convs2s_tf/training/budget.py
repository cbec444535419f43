"""The time budget of a run: training seconds counted over every process that trains it.

A preempted run resumes with the seconds its checkpoint recorded (`TrainingState`), so
`--max_train_minutes` is one budget for the run, however often it restarts, and the
cooldown before its end happens once.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from convs2s_tf.training.training_state import TrainingState


class TrainingClock:
    """The run's training seconds: the restored `state.train_seconds` plus this process's.

    Args:
        state: The run's `TrainingState` (restored before `start`).
        clock: Wall time in seconds (injectable for tests).
    """

    def __init__(self, state: TrainingState, clock: Callable[[], float] = time.time) -> None:
        self.state = state
        self._clock = clock
        self._restored = 0.0
        self._started = clock()

    def start(self) -> None:
        """Starts this process's count on top of the restored seconds."""
        self._restored = float(self.state.train_seconds.numpy())
        self._started = self._clock()

    def seconds(self) -> float:
        """The run's training seconds so far, earlier processes included."""
        return self._restored + self._clock() - self._started

    def open_epoch_seconds(self) -> float:
        """Seconds since the open epoch began (at an epoch end: the epoch just done)."""
        return self.seconds() - float(self.state.epoch_started_seconds.numpy())

    def forecast(self, at_epoch_end: bool) -> float:
        """The next epoch's expected duration: the one just done at an epoch end; at the
        start of a process, the last complete epoch's when it resumes at an epoch
        boundary, else 0 (a resumed epoch is finished before the budget is judged)."""
        if at_epoch_end:
            return self.open_epoch_seconds()
        if int(self.state.epoch_batches.numpy()) == 0:
            return float(self.state.epoch_seconds.numpy())
        return 0.0

    def end_epoch(self, epoch_seconds: float) -> None:
        """Records a complete epoch end that took `epoch_seconds` (`forecast(True)` as
        the budget judged it): the next epoch starts now."""
        self.state.epoch_seconds.assign(epoch_seconds)
        self.state.epoch_started_seconds.assign(self.seconds())

    def record(self) -> None:
        """Writes the seconds so far into the state (before every save)."""
        self.state.train_seconds.assign(self.seconds())


class WallClockLimit:
    """Keeps a run within `minutes` of training time, stopping only at epoch ends.

    Checked at every epoch end: training stops there if the next epoch, expected to
    last as long as the one just finished, would end past the budget (or if it is
    spent). So a run never overshoots by a whole epoch, and every stop comes with a
    validated checkpoint. The seconds are the run's (`TrainingClock`), so a resumed run
    continues the budget rather than starting a new one, and re-running a run the
    budget stopped trains no further.

    With `final_minutes`, `in_final_minutes` is true from the first check at most that
    many minutes before the budget's end: where a run the budget ends at a high
    learning rate starts its cooldown (the trainer shrinks the rate once per run).

    Args:
        minutes: The budget (0: none).
        final_minutes: The cooldown's length before the budget's end (0: none).
    """

    def __init__(self, minutes: float, final_minutes: float = 0.0) -> None:
        self.budget_seconds = 60.0 * minutes if minutes else None
        self.cooldown_start_seconds = (
            self.budget_seconds - 60.0 * final_minutes
            if self.budget_seconds and final_minutes
            else None
        )

    def expired(self, seconds: float, forecast: float) -> bool:
        """Whether a run that trained `seconds` must stop before an epoch of `forecast`."""
        return self.budget_seconds is not None and seconds + forecast > self.budget_seconds

    def in_final_minutes(self, seconds: float) -> bool:
        """Whether a run that trained `seconds` is within the cooldown's minutes."""
        return self.cooldown_start_seconds is not None and seconds >= self.cooldown_start_seconds
