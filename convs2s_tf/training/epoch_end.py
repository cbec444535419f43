"""The decisions of an epoch end, which the chief takes for every worker.

At an epoch end (or where training stops inside one) the chief validates and judges the
time budget on its clock, the only one that counts; every worker then receives the
chief's decisions (`ChiefDecisions`, through `Coordinator.from_chief`), so all anneal,
cool down, keep the same best checkpoint and stop at the same epoch end. What the
decisions change in the run's state is `record_validation` (the best loss, annealing)
and `cool_down`; `epoch_summary` is the line the epoch end prints.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from convs2s_tf.training.budget import TrainingClock, WallClockLimit
from convs2s_tf.training.coordination import Coordinator, Preempted
from convs2s_tf.training.plateau import PlateauSchedule, anneal_learning_rate, set_learning_rate
from convs2s_tf.training.training_state import TrainingState
from convs2s_tf.training.worker_agreement import ValidationVotes

if TYPE_CHECKING:
    import keras

# The float64 vector the chief broadcasts its decisions in: whether it validated, the
# validation loss, NLL and BLEU (-1: none), whether the time limit stops training, whether
# the cooldown is due, and whether a SIGTERM abandoned the validation.
_DECISIONS_SIZE = 7


@dataclasses.dataclass
class TimeBudget:
    """The run's time budget and cooldown, judged on the chief's clock.

    Attributes:
        clock: The run's training seconds (`TrainingClock`).
        time_limit: The budget and its cooldown (None: none).
        stop_condition: Optional callable checked before training and at every epoch
            end: True stops training as the time limit does.
        cooldown_condition: Optional callable checked at complete epoch ends until it
            first holds: the rate is then shrunk once by lr_shrink (as the time limit's
            cooldown does).
        epoch_seconds: The duration of the epoch that just ended, as the chief's time
            limit judged it (what `TrainingClock.end_epoch` records).
        expired: The chief's time limit verdict, as broadcast at the last check (so
            every worker stops at the same epoch end).
    """

    clock: TrainingClock
    time_limit: WallClockLimit | None = None
    stop_condition: Callable[[], bool] | None = None
    cooldown_condition: Callable[[], bool] | None = None
    epoch_seconds: float = 0.0
    expired: bool = False

    def chief_expired(self, at_epoch_end: bool) -> bool:
        """The chief's time limit check, which also forecasts the next epoch
        (`epoch_seconds`).

        Args:
            at_epoch_end: False for the check before training (see
                `TrainingClock.forecast`).
        """
        expired = self.stop_condition is not None and bool(self.stop_condition())
        self.epoch_seconds = self.clock.forecast(at_epoch_end)
        if self.time_limit is not None:
            expired |= self.time_limit.expired(self.clock.seconds(), self.epoch_seconds)
        return expired

    def chief_cooldown_due(self, cooled_down: bool) -> bool:
        """Whether the chief's clock calls for the cooldown now (never once `cooled_down`:
        it happens once per run)."""
        if cooled_down:
            return False
        due = self.cooldown_condition is not None and bool(self.cooldown_condition())
        if self.time_limit is not None:
            due |= self.time_limit.in_final_minutes(self.clock.seconds())
        return due


@dataclasses.dataclass(frozen=True)
class EpochEndDecisions:
    """What the chief decided at an epoch end: the same on every worker.

    Attributes:
        validation: The validation results, empty without a validation set: the chief's
            own; on other workers `valid_loss`, `valid_nll`, `valid_perplexity` and (if
            scored) `valid_bleu` as the chief found them.
        time_expired: Whether the time limit (or the stop condition) stops training here.
        cooldown_due: Whether the cooldown shrinks the learning rate here.
    """

    validation: dict[str, Any] = dataclasses.field(default_factory=dict)
    time_expired: bool = False
    cooldown_due: bool = False

    def to_vector(self, preempted: bool = False) -> list[float]:
        """The decisions as the chief broadcasts them (`preempted`: a SIGTERM abandoned
        the validation, and nothing else counts)."""
        values = np.zeros(_DECISIONS_SIZE)
        if self.validation:
            results = self.validation
            values[:4] = [1.0, results["valid_loss"], results["valid_nll"], -1.0]
            values[3] = results.get("valid_bleu", -1.0)
        values[4:] = [float(self.time_expired), float(self.cooldown_due), float(preempted)]
        return values.tolist()

    @classmethod
    def from_vector(cls, values: np.ndarray) -> EpochEndDecisions:
        """The decisions a worker receives as `values` (`to_vector`'s).

        Raises:
            Preempted: a SIGTERM abandoned the chief's validation.
        """
        if values[6]:
            raise Preempted("SIGTERM during validation")
        validation: dict[str, Any] = {}
        if values[0]:
            validation = {"valid_loss": float(values[1]), "valid_nll": float(values[2])}
            # Capped as the validator's perplexity is, so that it stays finite.
            validation["valid_perplexity"] = float(np.exp(min(values[2], 50.0)))
            if values[3] >= 0:
                validation["valid_bleu"] = float(values[3])
        return cls(validation, bool(values[4]), bool(values[5]))


class ChiefDecisions:
    """Takes the chief's decisions and gives them to every worker of the run.

    Args:
        coordinator: The run's `Coordinator` (its broadcast).
        votes: The vote rounds that end the chief's validation (`ValidationVotes`).
        budget: The run's `TimeBudget`; its `expired` is set to each broadcast verdict.
        state: The run's `TrainingState` (whether the run cooled down already).
        is_chief: Whether this worker is the chief.
    """

    def __init__(
        self,
        coordinator: Coordinator,
        votes: ValidationVotes,
        budget: TimeBudget,
        state: TrainingState,
        is_chief: bool,
    ) -> None:
        self.coordinator = coordinator
        self.votes = votes
        self.budget = budget
        self.state = state
        self.is_chief = is_chief

    def before_training(self) -> None:
        """Sets `budget.expired`, on every worker, to the chief's time limit check before
        the first step: a run the budget stopped trains no further when re-run."""
        expired = self.is_chief and self.budget.chief_expired(at_epoch_end=False)
        self.budget.expired = bool(self.coordinator.from_chief([float(expired)])[0])

    def at_epoch_end(
        self,
        validate: Callable[[], dict[str, Any]] | None,
        wait_for_chief_validation: Callable[[], None],
        complete: bool,
    ) -> EpochEndDecisions:
        """Validates on the chief and returns its decisions, on every worker.

        Args:
            validate: Runs the validation (only the chief calls it); None: none.
            wait_for_chief_validation: What the other workers do meanwhile (their
                `ValidationVotes.wait_for_chief`).
            complete: False where training stops inside the epoch (no cooldown then).

        Raises:
            Preempted: on every worker, when a SIGTERM abandoned the chief's validation.
        """
        own: EpochEndDecisions | None = None
        if self.is_chief:
            own, preempted = self._decide_on_chief(validate, complete)
            self.votes.chief_done()
            values = own.to_vector(preempted)
        else:
            wait_for_chief_validation()
            values = [0.0] * _DECISIONS_SIZE
        decisions = EpochEndDecisions.from_vector(self.coordinator.from_chief(values))
        if own is not None:
            # The same decisions, with every result of the chief's validation (the
            # vector carries only the figures the other workers need, not the BLEU
            # signature).
            decisions = own
        self.budget.expired = decisions.time_expired
        return decisions

    def _decide_on_chief(
        self, validate: Callable[[], dict[str, Any]] | None, complete: bool
    ) -> tuple[EpochEndDecisions, bool]:
        """The chief's decisions, and whether a SIGTERM abandoned its validation (then
        it took no other decision: the resumed run takes them at this epoch end again)."""
        try:
            validation = validate() if validate is not None else {}
            time_expired = self.budget.chief_expired(at_epoch_end=complete)
            # No cooldown inside an epoch: it waits for the next complete epoch end.
            cooldown_due = complete and self.budget.chief_cooldown_due(
                bool(self.state.cooled_down.numpy())
            )
        except Preempted:
            return EpochEndDecisions(), True
        return EpochEndDecisions(validation, time_expired, cooldown_due), False


def record_validation(
    state: TrainingState,
    schedule: PlateauSchedule,
    optimizer: keras.optimizers.Optimizer,
    validation: dict[str, Any],
    anneal: bool,
) -> bool:
    """Keeps the best validation loss and NLL, and anneals if `anneal`.

    Args:
        state: The run's `TrainingState`.
        schedule: The run's annealing (`PlateauSchedule`).
        optimizer: The optimiser whose rate annealing sets.
        validation: The epoch end's validation results (`valid_loss`, `valid_nll`).
        anneal: False where training stops inside an epoch (as in fairseq).

    Returns:
        Whether the loss improved (the checkpoint is then the new best).
    """
    loss, nll = validation["valid_loss"], validation["valid_nll"]
    improved = loss < float(state.best_valid_loss.numpy())
    if improved:
        state.best_valid_loss.assign(loss)
    state.best_valid_nll.assign(min(nll, float(state.best_valid_nll.numpy())))
    if anneal:
        anneal_learning_rate(schedule, state.learning_rate, optimizer, loss)
    return improved


def cool_down(
    state: TrainingState, optimizer: keras.optimizers.Optimizer, lr_shrink: float
) -> None:
    """Shrinks the learning rate by `lr_shrink`, once per run (`state.cooled_down`)."""
    state.cooled_down.assign(True)
    set_learning_rate(
        state.learning_rate,
        optimizer,
        float(state.learning_rate.numpy()) * lr_shrink,
        "the cooldown before the time limit",
    )


def epoch_summary(
    epoch: int,
    step: int,
    learning_rate: float,
    train_tokens_per_second: float,
    validation: dict[str, Any],
    validation_seconds: float | None,
    end_seconds: float,
) -> str:
    """The line an epoch end prints.

    Args:
        epoch: The epoch that ended.
        step: The step it ended at.
        learning_rate: The run's rate after the epoch end's decisions.
        train_tokens_per_second: The epoch's training speed.
        validation: Its validation results (empty: none).
        validation_seconds: How long validation took (None: none).
        end_seconds: How long the whole epoch end took.
    """
    summary = (
        f"epoch {epoch:3d} | step {step} | lr {learning_rate:.3g} | "
        f"train {train_tokens_per_second:,.0f} tok/s"
    )
    if validation:
        summary += (
            f" | valid loss {validation['valid_loss']:.3f} "
            f"ppl {validation['valid_perplexity']:.2f}"
        )
        if "valid_bleu" in validation:
            summary += f" BLEU {validation['valid_bleu']:.2f}"
        summary += f" ({validation_seconds:.0f} s)"
    # The whole epoch end (validation, checkpoints, summaries): the input pipeline adds
    # nothing to it (one iterator serves every epoch).
    return summary + f" | epoch end {end_seconds:.1f} s"
