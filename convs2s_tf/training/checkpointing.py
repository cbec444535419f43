"""A training run's checkpoints: saving the recent and the best, resuming."""

import os
import shutil
from typing import Any

import tensorflow as tf
from absl import logging

from convs2s_tf.runs import RunDirectory
from convs2s_tf.runs.checkpoints import (
    CheckpointError,
    UnreadableCheckpointError,
    restore_checkpoint,
)
from convs2s_tf.training.plateau import PlateauSchedule
from convs2s_tf.training.training_state import TrainingState


def recorded_state_value(path: str, name: str) -> float | None:
    """The `TrainingState` variable `name` (`best_valid_loss`, `train_seconds`, ...) in
    the checkpoint `path` (written by `TrainingCheckpoints`); None if the checkpoint holds
    no training state (the model alone: an imported or averaged run's)."""
    key = f"state/{name}/.ATTRIBUTES/VARIABLE_VALUE"
    if key not in dict(tf.train.list_variables(path)):
        return None
    return float(tf.train.load_variable(path, key))


class TrainingCheckpoints:
    """Saves and restores everything a resumed run needs, in its run directory.

    The checkpoint holds the objects `model`, `optimizer`, `state` and `schedule`. Recent
    checkpoints go to `checkpoints/`, the best one to `best/`; with `keep_epoch_ends`, the
    model alone at the last epoch ends to `epoch_ends/` too (to be averaged:
    `checkpoints/` also holds mid-epoch saves).

    Args:
        run_directory: The run's `RunDirectory`, with an absolute path.
        model: The built model.
        optimizer: The built optimiser (`FusedSGD`).
        state: The run's `TrainingState`.
        schedule: The run's `PlateauSchedule`.
        keep: Recent checkpoints kept.
        keep_epoch_ends: Epoch-end model checkpoints kept (0: none are written).
        worker_id: None on the chief; a non-chief worker's task id. Such a worker
            reads the run's checkpoints to resume but never saves (`Trainer.save` skips
            it: its variables equal the chief's); its managers point to a directory of
            its own, so that nothing it does can touch the run's files.
    """

    def __init__(
        self,
        run_directory: RunDirectory,
        model: Any,
        optimizer: Any,
        state: TrainingState,
        schedule: PlateauSchedule,
        keep: int,
        worker_id: int | None = None,
        keep_epoch_ends: int = 0,
    ) -> None:
        self.run_directory = run_directory
        self.model = model
        self.optimizer = optimizer
        self.state = state
        self.schedule = schedule
        self.checkpoint = tf.train.Checkpoint(
            model=model, optimizer=optimizer, state=state, schedule=schedule
        )
        self.write_directory = (
            run_directory if worker_id is None else run_directory.worker_directory(worker_id)
        )
        self.is_chief = worker_id is None
        self.manager = self.write_directory.checkpoint_manager(
            self.checkpoint, max_to_keep=keep, step_counter=state.step
        )
        self.best_manager = self.write_directory.best_checkpoint_manager(self.checkpoint)
        # Only the model is averaged: the optimiser's slots would double the files.
        self.epoch_end_manager = (
            self.write_directory.epoch_end_checkpoint_manager(
                tf.train.Checkpoint(model=model), max_to_keep=keep_epoch_ends
            )
            if keep_epoch_ends
            else None
        )

    def save(self, best: bool = False, epoch_end: bool = False) -> str:
        """Saves a checkpoint of the current step, also as the best one if `best`, and
        the model as an epoch end if `epoch_end` (and epoch ends are kept).

        The order keeps every kill survivable. The one in `checkpoints/` comes last: a
        resumed run continues from it, so what its state records (a new best loss, a
        closed epoch) is on disk before it; killed before its state file is renamed into
        place, a run resumes from the previous one and redoes the epoch, whose saves
        replace the same `ckpt-<step>` of `epoch_ends/` and `best/` (and `resume` takes
        `best/`'s loss as the best). The epoch end comes first: a first save stopped
        after `best/` resumes from there (`RunDirectory.resume_checkpoint`), past an
        epoch that `epoch_ends/` must hold already.

        Returns:
            The path of the checkpoint in `checkpoints/`.
        """
        if epoch_end and self.epoch_end_manager is not None:
            self.epoch_end_manager.save(checkpoint_number=self.state.step)
        if best:
            self.best_manager.save(checkpoint_number=self.state.step)
        path = self.manager.save(checkpoint_number=self.state.step)
        if not self.is_chief:
            shutil.rmtree(self.write_directory.path, ignore_errors=True)
        return path

    def resume(self) -> str | None:
        """Restores the checkpoint a resumed run continues from, if there is one.

        That is the latest one (see `RunDirectory.resume_checkpoint`). If it cannot be
        read (its files are missing, truncated or garbled, or the `checkpoint` state file
        naming it is), the newest readable one of `RunDirectory.resume_candidates` is
        restored instead, with one warning naming both. A checkpoint of another model is
        an error, never skipped. The state's best validation loss is then that of
        `best/`'s model (see `_take_best_loss_of_best_checkpoint`).

        Returns:
            The restored checkpoint's path, or None for a fresh start.

        Raises:
            CheckpointError: if checkpoint files exist but none can be read (naming the
                latest one and why), or one is from another model.
        """
        try:
            path = self.run_directory.resume_checkpoint()
            if path is None:
                logging.info("No checkpoint in %s: starting afresh.", self.run_directory.path)
                return None
            self.restore(path)
        except UnreadableCheckpointError as error:
            path = self._restore_fallback(error)
        self._take_best_loss_of_best_checkpoint(path)
        self.optimizer.learning_rate.assign(self.state.learning_rate)
        message = (
            f"Resumed from {path}: step {int(self.state.step.numpy())}, epoch "
            f"{int(self.state.epoch.numpy())} (+{int(self.state.epoch_batches.numpy())} "
            f"batches), learning rate {float(self.state.learning_rate.numpy()):g}."
        )
        # On the console too, which shows warnings only: a re-run must say that it
        # continues an earlier one rather than start afresh.
        if self.is_chief:
            print(message, flush=True)
        logging.info(message)
        return path

    def _take_best_loss_of_best_checkpoint(self, restored: str) -> None:
        """Sets the state's best validation loss to that of the model in `best/`.

        They differ after a kill between the save of `best/` and that of `checkpoints/`
        (the state is then older), after a fallback to an older checkpoint, or in a run
        whose saves were once ordered the other way (the state newer, `best/` stale).
        Either way `best/` is what the run tests and exports: a later epoch must beat
        its loss to replace it, and with no `best/` at all the next validation writes one.

        Args:
            restored: The checkpoint just restored.
        """
        recorded = float(self.state.best_valid_loss.numpy())
        try:
            best = self.run_directory.best_checkpoint()
            if best is not None and os.path.normpath(best) == os.path.normpath(restored):
                return
            loss = float("inf") if best is None else recorded_state_value(best, "best_valid_loss")
        except (CheckpointError, tf.errors.OpError, IndexError, ValueError) as error:
            logging.warning("Cannot read the best validation loss of best/ (%s).", error)
            return
        if loss is None or loss == recorded:
            return
        if best is None:
            held, then = "no checkpoint", "the next validation writes one"
        else:
            held, then = f"{best}, of validation loss {loss:g}", "a better model replaces it"
        logging.warning(
            "%s holds %s, but the resumed state records a best validation loss of %g (a save "
            "was interrupted): the state now records %g, and %s.",
            self.run_directory.best_dir,
            held,
            recorded,
            loss,
            then,
        )
        self.state.best_valid_loss.assign(loss)

    def _restore_fallback(self, failure: UnreadableCheckpointError) -> str:
        """Restores the newest readable checkpoint but the unreadable `failure.path`.

        Args:
            failure: The `UnreadableCheckpointError` of the latest checkpoint.

        Returns:
            The restored checkpoint's path.

        Raises:
            UnreadableCheckpointError: `failure`, when no other checkpoint is readable.
            CheckpointError: A readable one is from another model.
        """
        unreadable = [os.path.normpath(failure.path)]
        for path in self.run_directory.resume_candidates():
            if os.path.normpath(path) in unreadable:
                continue
            try:
                self.restore(path)
            except UnreadableCheckpointError:
                unreadable.append(os.path.normpath(path))
                continue
            skipped = f" (also unreadable: {', '.join(unreadable[1:])})" if unreadable[1:] else ""
            logging.warning(
                "%s is unreadable (%s); resuming from %s instead%s.",
                failure.subject,
                failure.reason,
                path,
                skipped,
            )
            return path
        raise failure

    def restore(self, path: str) -> None:
        """Restores `path` into the model, optimiser, state and schedule.

        Raises:
            UnreadableCheckpointError: `path` is missing or its files cannot be read.
            CheckpointError: `path` is from another model.
        """
        restore_checkpoint(self.checkpoint, path)
