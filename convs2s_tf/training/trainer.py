"""The training loop: a run's epochs, their steps and their epoch ends, on every worker.

What the loop builds on has its own module: the model and optimiser
(`training_objects`), the step (`steps`), the chief's epoch end decisions
(`epoch_end`), the workers' agreement outside the step (`worker_agreement`) and the
limits that stop a run (`stop_reasons`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import tensorflow as tf
from absl import logging

from convs2s_tf.runs import RunDirectory
from convs2s_tf.training.budget import TrainingClock, WallClockLimit
from convs2s_tf.training.checkpointing import TrainingCheckpoints
from convs2s_tf.training.coordination import Coordinator, Preempted, PreemptionWatch
from convs2s_tf.training.divergence import DivergenceGuard, TrainingDivergedError
from convs2s_tf.training.epoch_end import (
    ChiefDecisions,
    TimeBudget,
    cool_down,
    epoch_summary,
    record_validation,
)
from convs2s_tf.training.progress import EpochProgress
from convs2s_tf.training.stop_reasons import (
    PREEMPTED,
    epoch_end_pending,
    limit_reached,
    max_steps_reached,
)
from convs2s_tf.training.strategies import is_chief
from convs2s_tf.training.summaries import SummaryLogger
from convs2s_tf.training.training_input import TrainingInput, run_placement
from convs2s_tf.training.training_objects import build_training_objects
from convs2s_tf.training.validation import Validator
from convs2s_tf.training.worker_agreement import ValidationVotes, check_workers_agree_on_start

if TYPE_CHECKING:
    from convs2s_tf.data.tokenizer import Tokenizer
    from convs2s_tf.interop.vocabulary_tokenizer import VocabularyTokenizer
    from convs2s_tf.models import ConvS2S
    from convs2s_tf.training.config import TrainingConfig


class Trainer:
    """Trains a `ConvS2S` with the paper's optimiser under a `tf.distribute` strategy.

    The step is `TrainingSteps`' (token-summed loss, all-reduce, clipping, skipped
    non-finite updates). One iterator reads the whole run; an epoch ends after the
    input's `steps_per_epoch` steps, where the chief validates and decides annealing,
    the best checkpoint, the time limit and the cooldown for every worker
    (`ChiefDecisions`). Only the chief writes checkpoints. Before the first update, the
    workers check that all restored the same step and data (`data_fingerprint`), and
    stop with one line if not. A SIGTERM on any worker stops every worker after the same
    step, saved (`PREEMPTED`); on the chief during validation, it abandons the pass (the
    resumed run validates that epoch end again).
    The time budget (`time_limit`) counts the seconds of every process that trained the
    run (`TrainingState.train_seconds`), and its cooldown happens once per run.

    Args:
        model_fn: Builds the (unbuilt) model; called inside the strategy scope.
        config: A `TrainingConfig`.
        model_dir: Where checkpoints (`checkpoints/`, `best/`) and TensorBoard events
            (`train/`, `valid/`) go.
        strategy: A `tf.distribute.Strategy`.
        tokenizer: Target-side tokenizer with `decode` and `id_to_piece` (validation
            BLEU, samples and attention plots); None skips those.
        hparams: Flat dict logged to TensorBoard's hyperparameter dashboard.
    """

    def __init__(
        self,
        model_fn: Callable[[], ConvS2S],
        config: TrainingConfig,
        model_dir: str,
        strategy: tf.distribute.Strategy,
        tokenizer: Tokenizer | VocabularyTokenizer | None = None,
        hparams: Mapping[str, Any] | None = None,
    ) -> None:
        self.config = config.validate()
        # Absolute, so checkpoint state files stay valid whatever the working directory.
        self.run_directory = RunDirectory(model_dir).absolute()
        self.model_dir = self.run_directory.path
        self.strategy = strategy
        self.is_chief = is_chief(strategy)
        self.placement = run_placement(strategy)
        self.coordinator = Coordinator(strategy)
        self.preemption = PreemptionWatch()
        self.votes = ValidationVotes(self.coordinator, self.preemption)
        objects = build_training_objects(model_fn, self.config, strategy, self.preemption.vote)
        self.model = objects.model
        self.optimizer = objects.optimizer
        self.loss_scale = objects.loss_scale
        self.state = objects.state
        self.schedule = objects.schedule
        self.steps = objects.steps
        self.checkpoints = TrainingCheckpoints(
            self.run_directory,
            self.model,
            self.optimizer,
            self.state,
            self.schedule,
            keep=config.keep_checkpoints,
            worker_id=None if self.is_chief else strategy.cluster_resolver.task_id,
            keep_epoch_ends=config.average_last_n,
        )
        self.summaries = SummaryLogger(self.model_dir, enabled=self.is_chief)
        self.validator = Validator(
            self.model, config, self.summaries, tokenizer=tokenizer, is_chief=self.is_chief
        )
        self.divergence = DivergenceGuard(config.max_nonfinite_steps)
        self.hparams = hparams or {}
        # The step functions (`tf.function`s), traced for the dataset's element spec by
        # `_build_steps`.
        self._train_step: Any = None
        self._accumulate_step: Any = None
        self._apply_accumulated: Any = None
        self._epoch_train_rate = 0.0
        # Optional callable given every batch `train` consumes, once its step (or its
        # accumulation) ran: e.g. to record what each step trained on.
        self.after_batch: Callable[[Any], None] | None = None
        # The prepared data's fingerprint: the workers check that they all train on the
        # same data before the first update.
        self.data_fingerprint: str | None = None
        # The run's time budget and cooldown: set through `clock`, `time_limit`,
        # `stop_condition` and `cooldown_condition`.
        self.budget = TimeBudget(TrainingClock(self.state))
        self.chief_decisions = ChiefDecisions(
            self.coordinator, self.votes, self.budget, self.state, self.is_chief
        )

    # ------------------------------------------------------------ time budget
    @property
    def clock(self) -> TrainingClock:
        """The run's training seconds, as the chief's time limit counts them."""
        return self.budget.clock

    @clock.setter
    def clock(self, clock: TrainingClock) -> None:
        self.budget.clock = clock

    @property
    def time_limit(self) -> WallClockLimit | None:
        """The run's time budget and its cooldown (None: none)."""
        return self.budget.time_limit

    @time_limit.setter
    def time_limit(self, time_limit: WallClockLimit | None) -> None:
        self.budget.time_limit = time_limit

    @property
    def stop_condition(self) -> Callable[[], bool] | None:
        """Optional callable checked (on the chief) before training and at every epoch
        end: True stops training as the time limit does."""
        return self.budget.stop_condition

    @stop_condition.setter
    def stop_condition(self, condition: Callable[[], bool] | None) -> None:
        self.budget.stop_condition = condition

    @property
    def cooldown_condition(self) -> Callable[[], bool] | None:
        """Optional callable checked (on the chief) at complete epoch ends until it first
        holds: the rate is then shrunk once by lr_shrink (as the time limit's cooldown
        does)."""
        return self.budget.cooldown_condition

    @cooldown_condition.setter
    def cooldown_condition(self, condition: Callable[[], bool] | None) -> None:
        self.budget.cooldown_condition = condition

    # ---------------------------------------------------------- model and steps
    def _build_steps(self, element_spec: Any) -> None:
        """Traces the step functions for the dataset's element spec (see `TrainingSteps`)."""
        self.steps.build(element_spec)
        self._train_step = self.steps.train_step
        self._accumulate_step = self.steps.accumulate_step
        self._apply_accumulated = self.steps.apply_accumulated

    def build_steps(self, element_spec: Any) -> None:
        """Traces the training step for a distributed dataset's `element_spec`, to run
        `train_step` by hand (`train` does this itself), e.g. to time steps.

        Args:
            element_spec: The `element_spec` of the batches the steps will take (a
                dataset distributed by `strategy.distribute_datasets_from_function`).
        """
        self._build_steps(element_spec)

    def train_step(self, batch: Any) -> Mapping[str, tf.Tensor]:
        """Runs one training step (forward, loss, backward, all-reduce, clipping and the
        update, skipped when non-finite) on a distributed batch; `build_steps` first.

        Returns:
            The step's figures (`loss`, `tokens`, `applied`, ...), as `train` logs them.

        Raises:
            RuntimeError: `build_steps` was not called.
        """
        if self._train_step is None:
            raise RuntimeError("Trainer.train_step needs build_steps(element_spec) first.")
        return self._train_step(batch)

    # ------------------------------------------------------------ run directory
    def restore_or_initialize(self) -> str | None:
        """Resumes from the latest checkpoint (else `best/`), or starts afresh.

        Returns:
            The restored checkpoint's path, or None.

        Raises:
            CheckpointError: if checkpoint files exist but cannot be used.
        """
        return self.checkpoints.resume()

    def save(self, best: bool = False, epoch_end: bool = False) -> str | None:
        """Saves a checkpoint (also as the best one if `best`, and as an epoch end if
        `epoch_end`) on the chief; returns its path (None on other workers, which hold
        the same values and write nothing)."""
        if not self.is_chief:
            return None
        self.clock.record()
        return self.checkpoints.save(best=best, epoch_end=epoch_end)

    def write_run_config(self, run_config: Mapping[str, Any]) -> None:
        """Writes the model and data configuration next to the checkpoints (chief only).

        Raises:
            ValueError: if the directory already holds a run with another model config,
                other prepared data or another vocabulary.
        """
        self.run_directory.check_same_run(run_config)
        if self.is_chief:
            self.run_directory.write_config(run_config)

    # --------------------------------------------------------------- training
    def _should_stop(self) -> str | None:
        """Why the run stops before the next epoch (a limit it reached), or None."""
        return limit_reached(self.config, self.state, self.budget.expired)

    def train(
        self, training_input: TrainingInput, valid_dataset: tf.data.Dataset | None = None
    ) -> dict[str, Any]:
        """Trains until max_steps, max_epochs, the learning rate floor, the time limit or
        a SIGTERM (then `stop_reason` is `PREEMPTED`).

        Args:
            training_input: The run's batches (`TrainingInput`), read through one
                iterator from the epoch (and batch) the run resumes at.
            valid_dataset: Evaluation batches (with `source_text`/`reference_text`) or None.

        Returns:
            A dict of the final state and last validation results; `already_finished`
            is True when the restored run had stopped already (nothing was trained).
        """
        with self.preemption:
            self.restore_or_initialize()
            check_workers_agree_on_start(self.coordinator, self.state, self.data_fingerprint)
            self.clock.start()
            if self.is_chief:
                self.summaries.hparams(self.hparams)
            self.chief_decisions.before_training()
            stop_reason = self._should_stop()
            if stop_reason is not None and not epoch_end_pending(self.state):
                return self._already_finished(stop_reason)
            last_valid, stop_reason = self._train_epochs(training_input, valid_dataset)
        logging.info("Training stopped: %s.", stop_reason)
        self.summaries.flush()
        return {**self._final_state(), "stop_reason": stop_reason, **last_valid}

    def _final_state(self) -> dict[str, Any]:
        return {
            "step": int(self.state.step.numpy()),
            "epoch": int(self.state.epoch.numpy()),
            "learning_rate": float(self.state.learning_rate.numpy()),
            "train_seconds": self.clock.seconds(),
        }

    def _already_finished(self, stop_reason: str) -> dict[str, Any]:
        """The result of a restored run that had stopped already: says so, trains nothing."""
        message = (
            f"Nothing to train: the run in {self.model_dir} stopped at step "
            f"{int(self.state.step.numpy())}, epoch {int(self.state.epoch.numpy())} "
            f"({stop_reason})."
        )
        if self.is_chief:
            print(message, flush=True)
        logging.info(message)
        return {**self._final_state(), "stop_reason": stop_reason, "already_finished": True}

    def _train_epochs(
        self, training_input: TrainingInput, valid_dataset: tf.data.Dataset | None
    ) -> tuple[dict[str, Any], str | None]:
        """Trains epochs until a stop; returns (last validation results, stop reason)."""
        steps_per_epoch = training_input.steps_per_epoch(self.placement)
        first_epoch = int(self.state.epoch.numpy()) + 1
        # Every replica of this worker took `epoch_batches` batches of the open epoch.
        skip = int(self.state.epoch_batches.numpy()) * self.placement.replicas_per_worker
        distributed = self.strategy.distribute_datasets_from_function(
            lambda context: training_input.dataset(context, first_epoch, skip)
        )
        if self._train_step is None and self._accumulate_step is None:
            self._build_steps(distributed.element_spec)
        iterator = iter(distributed)
        last_valid: dict[str, Any] = {}
        # Set already when the run had stopped but a SIGTERM abandoned the epoch end of
        # that stop (`epoch_end_pending`): then that epoch end is all there is to do.
        stop_reason = self._should_stop()
        while True:
            epoch = int(self.state.epoch.numpy()) + 1
            if stop_reason is None:
                stop_reason = self._train_epoch(iterator, steps_per_epoch)
            if stop_reason == PREEMPTED:
                break
            try:
                # A stop inside the epoch: validate, log and checkpoint as at an epoch
                # end (the epoch stays open, so a resumed run finishes it).
                last_valid = self._end_epoch(epoch, valid_dataset, complete=stop_reason is None)
            except Preempted:
                # SIGTERM during the epoch end: its steps are saved, its validation is
                # not (the resumed run validates this epoch end again).
                stop_reason = PREEMPTED
                break
            stop_reason = stop_reason or self._should_stop()
            if stop_reason is not None:
                break
        if stop_reason == PREEMPTED:
            self.save()
        return last_valid, stop_reason

    def _train_epoch(self, iterator: Iterator[Any], steps_per_epoch: int) -> str | None:
        """Trains on the open epoch's remaining steps; returns why training stopped
        inside it, or None at its end."""
        config = self.config
        progress = EpochProgress(
            self.summaries,
            config.log_every_steps,
            steps_per_epoch,
            show_bar=config.progress_bar and self.is_chief,
        )
        batches = int(self.state.epoch_batches.numpy())
        micro_batches = 0
        stop_reason = None
        while batches < steps_per_epoch:
            self.preemption.update_vote()
            batch = next(iterator)
            batches += 1
            if not self.steps.accumulates:
                result = self._train_step(batch)
            else:
                self._accumulate_step(batch)
                micro_batches += 1
            if self.after_batch is not None:
                self.after_batch(batch)
            if self.steps.accumulates:
                if micro_batches % config.update_freq and batches < steps_per_epoch:
                    continue
                result = self._apply_accumulated()
            self.state.epoch_batches.assign(batches)
            self.divergence.record(result, int(self.state.step.numpy()))
            step = int(self.state.step.numpy())
            # The rate the update used: the run's rate times the warm-up's factor.
            applied_rate = float(self.optimizer.learning_rate.numpy())
            progress.update(batches, step, result, applied_rate)
            if float(result["stop_votes"]) > 0:
                stop_reason = PREEMPTED
                break
            if config.save_every_steps and step % config.save_every_steps == 0:
                self.save()
            stop_reason = max_steps_reached(config, step)
            if stop_reason is not None:
                break
        self._epoch_train_rate = progress.tokens_per_second()
        return stop_reason

    # ------------------------------------------------------------- epoch ends
    def _end_epoch(
        self, epoch: int, valid_dataset: tf.data.Dataset | None, complete: bool = True
    ) -> dict[str, Any]:
        """Validates, logs and checkpoints; `complete=False` when training stops inside
        the epoch (no annealing step then, as in fairseq, and the epoch stays open).

        Raises:
            Preempted: a SIGTERM abandoned validation (nothing of it was recorded).
        """
        started = time.time()
        validate = None if valid_dataset is None else lambda: self.validate(valid_dataset)
        decisions = self.chief_decisions.at_epoch_end(
            validate, self._wait_for_chief_validation, complete
        )
        results = decisions.validation
        validation_seconds = time.time() - started if results else None
        improved_loss = bool(results) and record_validation(
            self.state, self.schedule, self.optimizer, results, anneal=complete
        )
        if decisions.cooldown_due:
            cool_down(self.state, self.optimizer, self.config.lr_shrink)
        if complete:
            self.state.epoch.assign(epoch)
            self.state.epoch_batches.assign(0)
            self.clock.end_epoch(self.budget.epoch_seconds)
        # A stop inside the epoch counts as an epoch end too: it is where the run ends.
        self.state.epoch_end_step.assign(self.state.step)
        self.save(best=improved_loss, epoch_end=True)
        step = int(self.state.step.numpy())
        if self.is_chief:
            self.summaries.histograms("train", step, self.model.trainable_variables)
        summary = epoch_summary(
            epoch,
            step,
            float(self.state.learning_rate.numpy()),
            self._epoch_train_rate,
            results,
            validation_seconds,
            end_seconds=time.time() - started,
        )
        if self.is_chief:
            print(summary, flush=True)
        logging.info(summary)
        return results

    def validate(self, valid_dataset: tf.data.Dataset) -> dict[str, Any]:
        """Validation loss, perplexity and (with a tokenizer) BLEU, logged to TensorBoard."""
        return self.validator.validate(
            valid_dataset, int(self.state.step.numpy()), should_stop=self.votes.stop_requested
        )

    def _wait_for_chief_validation(self) -> None:
        """A worker's part of the chief's validation (`ValidationVotes.wait_for_chief`):
        the trainer's own method, so that a run can act where a worker starts waiting
        (tests/helpers/multi_worker_preemption.py sends a SIGTERM there)."""
        self.votes.wait_for_chief()


# PREEMPTED and TrainingDivergedError are re-exported: callers name them by this module.
__all__ = ["PREEMPTED", "Trainer", "TrainingDivergedError"]
