"""The training loop and its distributed steps."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from convs2s_tf.data.pipeline.training import Placement
from convs2s_tf.runs import RunDirectory
from convs2s_tf.training.budget import TrainingClock, WallClockLimit
from convs2s_tf.training.checkpointing import TrainingCheckpoints
from convs2s_tf.training.coordination import (
    Coordinator,
    Preempted,
    PreemptionWatch,
    cluster_size,
    fingerprint_number,
)
from convs2s_tf.training.cpu_features import bfloat16_warning
from convs2s_tf.training.divergence import DivergenceGuard, TrainingDivergedError
from convs2s_tf.training.loss_scaling import DynamicLossScale
from convs2s_tf.training.optimizers import make_optimizer
from convs2s_tf.training.plateau import (
    PlateauSchedule,
    anneal_learning_rate,
    set_learning_rate,
)
from convs2s_tf.training.progress import EpochProgress
from convs2s_tf.training.steps import TrainingSteps
from convs2s_tf.training.strategies import is_chief
from convs2s_tf.training.summaries import SummaryLogger
from convs2s_tf.training.training_state import TrainingState
from convs2s_tf.training.validation import Validator

if TYPE_CHECKING:
    from convs2s_tf.data.tokenizer import Tokenizer
    from convs2s_tf.interop.vocabulary_tokenizer import VocabularyTokenizer
    from convs2s_tf.models import ConvS2S
    from convs2s_tf.training.config import TrainingConfig

# The Keras precision policy of each `TrainingConfig.dtype`.
_POLICIES = {"float32": "float32", "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}


# Why training stopped when a SIGTERM asked it to (the pipelines exit with
# `coordination.PREEMPTED_EXIT_STATUS` then).
PREEMPTED = "preempted (SIGTERM): saved, re-run the command to resume"


def _placement(strategy: tf.distribute.Strategy) -> Placement:
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


class Trainer:
    """Trains a `ConvS2S` with the paper's optimiser under a `tf.distribute` strategy.

    The step is `TrainingSteps`' (token-summed loss, all-reduce, clipping, skipped
    non-finite updates). One iterator reads the whole run; an epoch ends after the
    input's `steps_per_epoch` steps, where the chief validates and decides annealing,
    the best checkpoint, the time limit and the cooldown for every worker
    (`Coordinator`). Only the chief writes checkpoints. Before the first update, the
    workers check that all restored the same step and data (`data_fingerprint`),
    and stop with one line if not. A SIGTERM on any worker stops
    every worker after the same step, saved (`PREEMPTED`); on the chief during
    validation, it abandons the pass (the resumed run validates that epoch end again).
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
        self.placement = _placement(strategy)
        self.coordinator = Coordinator(strategy)
        self.preemption = PreemptionWatch()
        self._build_model_and_optimizer(model_fn)
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
        # The run's time budget and cooldown, judged on the chief's `clock`.
        self.time_limit: WallClockLimit | None = None
        self.clock = TrainingClock(self.state)
        # Optional callable checked before training and at every epoch end: True stops
        # training as the time limit does.
        self.stop_condition: Callable[[], bool] | None = None
        # Optional callable checked at complete epoch ends until it first holds: the rate
        # is then shrunk once by lr_shrink (as the time limit's cooldown does).
        self.cooldown_condition: Callable[[], bool] | None = None
        # The chief's time limit check, as broadcast at the last epoch end.
        self._time_expired = False
        # The duration of the epoch that just ended, as the chief's time limit judged it.
        self._epoch_seconds = 0.0

    def _build_model_and_optimizer(self, model_fn: Callable[[], ConvS2S]) -> None:
        """Builds the model, the optimiser (with its slots), the training state and the
        step functions under the strategy's scope, in the run's dtype and seed."""
        config, strategy = self.config, self.strategy
        if config.dtype == "bfloat16" and not tf.config.list_logical_devices("GPU"):
            warning = bfloat16_warning()
            if warning:
                logging.warning(warning)
        keras.mixed_precision.set_global_policy(_POLICIES[config.dtype])
        keras.utils.set_random_seed(config.seed)
        with strategy.scope():
            self.model = model_fn()
            self.model(self.model.dummy_inputs())
            self.optimizer = make_optimizer(config)
            # Keras 3 creates slots lazily; they must exist before the first traced step.
            self.loss_scale = (
                DynamicLossScale(self.optimizer) if config.dtype == "float16" else None
            )
            if self.loss_scale is not None:
                self.loss_scale.build(self.model.trainable_variables)
            else:
                self.optimizer.build(self.model.trainable_variables)
            self.state = TrainingState(config.learning_rate)
            self.schedule = PlateauSchedule(
                config.lr_shrink, config.lr_threshold, config.lr_patience
            )
            self.steps = TrainingSteps(
                self.model,
                self.optimizer,
                self.state,
                config,
                strategy,
                self.loss_scale,
                self.preemption.vote,
            )

    def _build_steps(self, element_spec):
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
    def _should_stop(self):
        config = self.config
        if config.max_steps and int(self.state.step.numpy()) >= config.max_steps:
            return "reached max_steps"
        if config.max_epochs and int(self.state.epoch.numpy()) >= config.max_epochs:
            return "reached max_epochs"
        if float(self.state.learning_rate.numpy()) <= config.min_learning_rate:
            return f"learning rate reached the floor {config.min_learning_rate:g}"
        if self._time_expired:
            return "reached the time limit"
        return None

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
            if self.coordinator.multi_worker:
                self.coordinator.check_workers_agree(self._restored_position())
            self.clock.start()
            if self.is_chief:
                self.summaries.hparams(self.hparams)
            self._time_expired = bool(self._from_chief(self._chief_time_expired(False))[0])
            stop_reason = self._should_stop()
            if stop_reason is not None and not self._epoch_end_pending():
                return self._already_finished(stop_reason)
            last_valid, stop_reason = self._train_epochs(training_input, valid_dataset)
        logging.info("Training stopped: %s.", stop_reason)
        self.summaries.flush()
        return {**self._final_state(), "stop_reason": stop_reason, **last_valid}

    def _epoch_end_pending(self):
        """Whether the run stopped inside an epoch but a SIGTERM abandoned the epoch end
        that stop makes (its validation and checkpoint): `_train_epochs` does it."""
        state = self.state
        return int(state.epoch_batches.numpy()) > 0 and int(state.epoch_end_step.numpy()) != int(
            state.step.numpy()
        )

    def _restored_position(self):
        """Where this worker resumes, as the workers compare it before the first update."""
        state = self.state
        return {
            "step": float(state.step.numpy()),
            "epoch": float(state.epoch.numpy()),
            "epoch_batches": float(state.epoch_batches.numpy()),
            "data": fingerprint_number(self.data_fingerprint),
        }

    def _final_state(self):
        return {
            "step": int(self.state.step.numpy()),
            "epoch": int(self.state.epoch.numpy()),
            "learning_rate": float(self.state.learning_rate.numpy()),
            "train_seconds": self.clock.seconds(),
        }

    def _already_finished(self, stop_reason):
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

    def _train_epochs(self, training_input, valid_dataset):
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
        # that stop (`_epoch_end_pending`): then that epoch end is all there is to do.
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

    def _train_epoch(self, iterator, steps_per_epoch):
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
            if config.max_steps and step >= config.max_steps:
                stop_reason = "reached max_steps"
                break
        self._epoch_train_rate = progress.tokens_per_second()
        return stop_reason

    # ------------------------------------------------------------- epoch ends
    def _from_chief(self, values):
        return self.coordinator.from_chief(values)

    def _chief_time_expired(self, at_epoch_end):
        """The chief's time limit check (the only clock that counts), as [0.0 or 1.0]."""
        if not self.is_chief:
            return [0.0]
        expired = self.stop_condition is not None and self.stop_condition()
        self._epoch_seconds = self.clock.forecast(at_epoch_end)
        if self.time_limit is not None:
            expired |= self.time_limit.expired(self.clock.seconds(), self._epoch_seconds)
        return [float(expired)]

    def _chief_cooldown_due(self, complete):
        """Whether the chief's clock calls for the cooldown now (once per run)."""
        if not complete or bool(self.state.cooled_down.numpy()):
            return False
        due = self.cooldown_condition is not None and bool(self.cooldown_condition())
        if self.time_limit is not None:
            due |= self.time_limit.in_final_minutes(self.clock.seconds())
        return due

    def _epoch_end_decisions(self, valid_dataset, complete):
        """Validates on the chief and returns (results, time expired, cooldown due), the
        chief's on every worker.

        Raises:
            Preempted: on every worker, when a SIGTERM on the chief abandoned validation.
        """
        results: dict[str, Any] = {}
        values = np.zeros(7)
        if self.is_chief:
            try:
                if valid_dataset is not None:
                    results = self.validate(valid_dataset)
                    values[:4] = [1.0, results["valid_loss"], results["valid_nll"], -1.0]
                    values[3] = results.get("valid_bleu", -1.0)
                values[4] = self._chief_time_expired(complete)[0]
                values[5] = float(self._chief_cooldown_due(complete))
            except Preempted:
                values[6] = 1.0
            if self.coordinator.multi_worker:
                self.coordinator.vote_round(chief_busy=False, stop=self.preemption.requested)
        else:
            self._wait_for_chief_validation()
        values = self._from_chief(values)
        if values[6]:
            raise Preempted("SIGTERM during validation")
        if not self.is_chief and values[0]:
            results = {"valid_loss": float(values[1]), "valid_nll": float(values[2])}
            results["valid_perplexity"] = float(np.exp(min(values[2], 50.0)))
            if values[3] >= 0:
                results["valid_bleu"] = float(values[3])
        return results, bool(values[4]), bool(values[5])

    def _end_epoch(self, epoch, valid_dataset, complete=True):
        """Validates, logs and checkpoints; `complete=False` when training stops inside
        the epoch (no annealing step then, as in fairseq, and the epoch stays open).

        Raises:
            Preempted: a SIGTERM abandoned validation (nothing of it was recorded).
        """
        started = time.time()
        results, self._time_expired, cooldown = self._epoch_end_decisions(valid_dataset, complete)
        validation_seconds = time.time() - started if results else None
        improved_loss = bool(results) and self._record_validation(results, anneal=complete)
        if cooldown:
            self.state.cooled_down.assign(True)
            rate = float(self.state.learning_rate.numpy())
            set_learning_rate(
                self.state.learning_rate,
                self.optimizer,
                rate * self.config.lr_shrink,
                "the cooldown before the time limit",
            )
        if complete:
            self.state.epoch.assign(epoch)
            self.state.epoch_batches.assign(0)
            self.clock.end_epoch(self._epoch_seconds)
        # A stop inside the epoch counts as an epoch end too: it is where the run ends.
        self.state.epoch_end_step.assign(self.state.step)
        self.save(best=improved_loss, epoch_end=True)
        step = int(self.state.step.numpy())
        if self.is_chief:
            self.summaries.histograms("train", step, self.model.trainable_variables)
        end_seconds = time.time() - started
        summary = self._epoch_summary(epoch, step, results, validation_seconds, end_seconds)
        if self.is_chief:
            print(summary, flush=True)
        logging.info(summary)
        return results

    def validate(self, valid_dataset: tf.data.Dataset) -> dict[str, Any]:
        """Validation loss, perplexity and (with a tokenizer) BLEU, logged to TensorBoard."""
        return self.validator.validate(
            valid_dataset, int(self.state.step.numpy()), should_stop=self._stop_requested
        )

    def _stop_requested(self):
        """Whether any worker was asked to stop (SIGTERM): checked between the batches of
        validation, which only the chief runs (the others wait in `vote_round`s)."""
        if not self.coordinator.multi_worker:
            return self.preemption.requested
        return self.coordinator.vote_round(chief_busy=True, stop=self.preemption.requested)[1]

    def _wait_for_chief_validation(self):
        """A worker's part of the chief's validation: votes between its batches."""
        while self.coordinator.vote_round(chief_busy=False, stop=self.preemption.requested)[0]:
            pass

    def _record_validation(self, results, anneal):
        """Keeps the best validation loss and NLL, and anneals if `anneal`; returns
        whether the loss improved (the checkpoint is then the new best)."""
        loss, nll = results["valid_loss"], results["valid_nll"]
        improved = loss < float(self.state.best_valid_loss.numpy())
        if improved:
            self.state.best_valid_loss.assign(loss)
        self.state.best_valid_nll.assign(min(nll, float(self.state.best_valid_nll.numpy())))
        if anneal:
            anneal_learning_rate(self.schedule, self.state.learning_rate, self.optimizer, loss)
        return improved

    def _epoch_summary(self, epoch, step, results, validation_seconds, end_seconds):
        summary = (
            f"epoch {epoch:3d} | step {step} | lr {float(self.state.learning_rate.numpy()):.3g} | "
            f"train {self._epoch_train_rate:,.0f} tok/s"
        )
        if results:
            summary += (
                f" | valid loss {results['valid_loss']:.3f} ppl {results['valid_perplexity']:.2f}"
            )
            if "valid_bleu" in results:
                summary += f" BLEU {results['valid_bleu']:.2f}"
            summary += f" ({validation_seconds:.0f} s)"
        # The whole epoch end (validation, checkpoints, summaries): the input pipeline
        # adds nothing to it (one iterator serves every epoch).
        return summary + f" | epoch end {end_seconds:.1f} s"


# TrainingDivergedError is re-exported: pipelines name it by this module.
__all__ = ["Trainer", "TrainingDivergedError"]
