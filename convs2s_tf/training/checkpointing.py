"""A training run's checkpoints: saving the recent and the best, resuming."""

import os
import shutil

import tensorflow as tf
from absl import logging

from convs2s_tf.runs.checkpoints import UnreadableCheckpointError, restore_checkpoint


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
        run_directory,
        model,
        optimizer,
        state,
        schedule,
        keep,
        worker_id=None,
        keep_epoch_ends=0,
    ):
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

    def save(self, best=False, epoch_end=False):
        """Saves a checkpoint of the current step, also as the best one if `best`, and
        the model as an epoch end if `epoch_end` (and epoch ends are kept).

        Returns:
            The path of the checkpoint in `checkpoints/`.
        """
        path = self.manager.save(checkpoint_number=self.state.step)
        if best:
            self.best_manager.save(checkpoint_number=self.state.step)
        if epoch_end and self.epoch_end_manager is not None:
            self.epoch_end_manager.save(checkpoint_number=self.state.step)
        if not self.is_chief:
            shutil.rmtree(self.write_directory.path, ignore_errors=True)
        return path

    def resume(self):
        """Restores the checkpoint a resumed run continues from, if there is one.

        That is the latest one (see `RunDirectory.resume_checkpoint`). If it cannot be
        read (its files are missing, truncated or garbled, or the `checkpoint` state file
        naming it is), the newest readable one of `RunDirectory.resume_candidates` is
        restored instead, with one warning naming both. A checkpoint of another model is
        an error, never skipped.

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

    def restore(self, path):
        """Restores `path` into the model, optimiser, state and schedule.

        Raises:
            UnreadableCheckpointError: `path` is missing or its files cannot be read.
            CheckpointError: `path` is from another model.
        """
        restore_checkpoint(self.checkpoint, path)
