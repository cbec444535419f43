"""The training loop: distributed steps, validation, checkpoints and TensorBoard."""

import dataclasses
import json
import math
import os
import shutil
import time

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from convs2s_tf.decoding import SearchConfig, best_hypothesis_function
from convs2s_tf.evaluation import corpus_scores
from convs2s_tf.training.checkpoints import (
    CheckpointError,
    checkpoint_has,
    latest_checkpoint,
    restore_checkpoint,
)
from convs2s_tf.training.fused_sgd import FusedSGD
from convs2s_tf.training.losses import bucketed_token_count, fused_token_losses
from convs2s_tf.training.plateau import PlateauSchedule
from convs2s_tf.training.summaries import SummaryLogger
from convs2s_tf.training.training_state import TrainingState
from convs2s_tf.vocabulary import EOS_ID

_SUM = tf.distribute.ReduceOp.SUM


class TrainingDivergedError(RuntimeError):
    """Too many consecutive updates with a NaN or infinite loss or gradient."""


def _is_chief(strategy):
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    return resolver.task_type == "chief" or (
        resolver.task_type == "worker" and resolver.task_id == 0
    )


class Trainer:
    """Trains a `ConvS2S` with the paper's optimiser under a `tf.distribute` strategy.

    The loss of a step is summed over the non-pad target tokens of every replica (and
    every accumulated micro-batch) and divided by their global count, so an update does
    not depend on the number of replicas; gradients are all-reduced before they are
    renormalised to the global norm `clip_norm`, and an update whose loss or gradient is
    not finite is skipped.

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

    def __init__(self, model_fn, config, model_dir, strategy, tokenizer=None, hparams=None):
        self.config = config.validate()
        # Absolute, so checkpoint state files stay valid whatever the working directory.
        self.model_dir = os.path.abspath(model_dir)
        model_dir = self.model_dir
        self.strategy = strategy
        self.tokenizer = tokenizer
        self.is_chief = _is_chief(strategy)
        if config.mixed_precision:
            keras.mixed_precision.set_global_policy("mixed_bfloat16")
        keras.utils.set_random_seed(config.seed)
        with strategy.scope():
            self.model = model_fn()
            self.model(self.model.dummy_inputs())
            self.optimizer = FusedSGD(
                learning_rate=config.learning_rate, momentum=config.momentum, nesterov=True
            )
            # Keras 3 creates slots lazily; they must exist before the first traced step.
            self.optimizer.build(self.model.trainable_variables)
            self.state = TrainingState(config.learning_rate)
            self.schedule = PlateauSchedule(
                config.lr_shrink, config.lr_threshold, config.lr_patience
            )
            self.accumulators = None
            if config.update_freq > 1:
                self.accumulators = [
                    tf.Variable(tf.zeros_like(v), trainable=False, name="accumulated_gradient")
                    for v in self.model.trainable_variables
                ]
                self.accumulated_sums = tf.Variable(tf.zeros([3]), trainable=False)
        self.checkpoint = tf.train.Checkpoint(
            model=self.model, optimizer=self.optimizer, state=self.state, schedule=self.schedule
        )
        write_dir = (
            model_dir
            if self.is_chief
            else os.path.join(model_dir, f"tmp_worker_{strategy.cluster_resolver.task_id}")
        )
        self._write_dir = write_dir
        self.manager = tf.train.CheckpointManager(
            self.checkpoint,
            os.path.join(write_dir, "checkpoints"),
            max_to_keep=config.keep_checkpoints,
            step_counter=self.state.step,
            checkpoint_name="ckpt",
        )
        self.best_manager = tf.train.CheckpointManager(
            self.checkpoint, os.path.join(write_dir, "best"), max_to_keep=1, checkpoint_name="ckpt"
        )
        self.summaries = SummaryLogger(model_dir, enabled=self.is_chief)
        self.hparams = hparams or {}
        self._train_step = None
        self._accumulate_step = None
        self._search = None
        self._evaluate = None
        self._apply_accumulated = None
        self._epoch_train_rate = 0.0
        self._nonfinite_in_a_row = 0
        # Optional callable checked at every epoch end (e.g. a wall-clock limit).
        self.stop_condition = None

    # ----------------------------------------------------------------- steps
    def _replica_gradients(self, batch):
        with tf.GradientTape() as tape:
            loss_sum, nll_sum, tokens = self._loss_sums(batch, training=True)
        gradients = tape.gradient(loss_sum, self.model.trainable_variables)
        gradients = [tf.convert_to_tensor(g) for g in gradients]
        return gradients, tf.stack([loss_sum, nll_sum, tokens])

    def _loss_sums(self, batch, training):
        """(loss, nll, tokens) sums; logits are computed at non-pad targets only."""
        encoder_output = self.model.encode(batch["source"], training=training)
        features = self.model.decoder.features(
            batch["target_input"], encoder_output, training=training
        )
        targets = batch["target"]
        if self.config.jit_compile:
            # An XLA-compiled step needs shapes known when it compiles: every position
            # is scored and padding weighs 0.
            rows = tf.reshape(features, [-1, features.shape[-1]])
            targets = tf.reshape(targets, [-1])
            weights = tf.cast(tf.not_equal(targets, self.model.decoder.pad_id), tf.float32)
            num_tokens = tf.reduce_sum(weights)
        else:
            # gather_nd rather than boolean_mask: its gradient is one dense scatter, where
            # boolean_mask's (a segment sum) cost 20 ms a step in bfloat16. The row count
            # is rounded up to a bucket for the XLA-compiled loss (the extra rows repeat
            # position (0, 0) and weigh 0).
            positions = tf.where(tf.not_equal(targets, self.model.decoder.pad_id))
            count = tf.shape(positions)[0]
            padding = bucketed_token_count(count) - count
            positions = tf.pad(positions, [[0, padding], [0, 0]])
            weights = tf.sequence_mask(count, count + padding, tf.float32)
            rows = tf.gather_nd(features, positions)
            targets = tf.gather_nd(targets, positions)
            num_tokens = tf.cast(count, tf.float32)
        logits, bias = self.model.decoder.unbiased_output_logits(rows)
        loss_sum, nll_sum = fused_token_losses(
            logits, bias, targets, weights, self.config.label_smoothing
        )
        return loss_sum, nll_sum, num_tokens

    def _reduced_gradients(self, batch):
        gradients, sums = self.strategy.run(self._replica_gradients, args=(batch,))
        gradients = [self.strategy.reduce(_SUM, g, axis=None) for g in gradients]
        return gradients, self.strategy.reduce(_SUM, sums, axis=None)

    def _apply(self, gradients, sums):
        tokens = tf.maximum(sums[2], 1.0)
        # The per-token mean and the clipping to `clip_norm` in one scale (one pass over
        # each gradient): `g / tokens * min(1, clip_norm / ||g / tokens||)`.
        gradient_norm = tf.linalg.global_norm(gradients) / tokens
        scale = 1.0 / tokens
        if self.config.clip_norm:
            scale *= tf.minimum(1.0, self.config.clip_norm / gradient_norm)
        gradients = [g * scale for g in gradients]
        finite = tf.math.is_finite(sums[0]) & tf.math.is_finite(gradient_norm)

        def apply():
            self.optimizer.apply(gradients, self.model.trainable_variables)
            return tf.constant(True)

        applied = tf.cond(finite, apply, lambda: tf.constant(False))
        self.state.step.assign_add(1)
        return {
            "loss": sums[0] / tokens,
            "nll": sums[1] / tokens,
            "tokens": sums[2],
            "gradient_norm": gradient_norm,
            "applied": applied,
        }

    def _train_step_fn(self, batch):
        return self._apply(*self._reduced_gradients(batch))

    def _accumulate_fn(self, batch):
        gradients, sums = self._reduced_gradients(batch)
        for accumulator, gradient in zip(self.accumulators, gradients):
            accumulator.assign_add(gradient)
        self.accumulated_sums.assign_add(sums)
        return sums

    def _apply_accumulated_fn(self):
        result = self._apply([tf.identity(a) for a in self.accumulators], self.accumulated_sums)
        with tf.control_dependencies(list(result.values())):
            for accumulator in self.accumulators:
                accumulator.assign(tf.zeros_like(accumulator))
            self.accumulated_sums.assign(tf.zeros([3]))
        return result

    def _build_steps(self, element_spec):
        jit = self.config.jit_compile
        if self.accumulators is None:
            self._train_step = tf.function(
                self._train_step_fn, input_signature=[element_spec], jit_compile=jit
            )
        else:
            self._accumulate_step = tf.function(
                self._accumulate_fn, input_signature=[element_spec], jit_compile=jit
            )
            self._apply_accumulated = tf.function(self._apply_accumulated_fn)

    # ----------------------------------------------------------- checkpoints
    def restore_or_initialize(self):
        """Resumes from the latest checkpoint, or starts afresh when there is none.

        With `checkpoints/` gone but `best/` present the run resumes from the best
        checkpoint (a fresh start would overwrite it at its first epoch end).

        Raises:
            CheckpointError: if checkpoint files exist but cannot be used.
        """
        path = latest_checkpoint(os.path.join(self.model_dir, "checkpoints"))
        if path is None:
            path = latest_checkpoint(os.path.join(self.model_dir, "best"))
            if path is not None:
                logging.warning(
                    "%s/checkpoints holds no checkpoint but best/ does: resuming from %s.",
                    self.model_dir,
                    path,
                )
        if path is None:
            logging.info("No checkpoint in %s: starting afresh.", self.model_dir)
            return None
        self._restore(path)
        self.optimizer.learning_rate.assign(self.state.learning_rate)
        logging.info(
            "Resumed from %s: step %d, epoch %d (+%d batches), learning rate %g.",
            path,
            int(self.state.step.numpy()),
            int(self.state.epoch.numpy()),
            int(self.state.epoch_batches.numpy()),
            float(self.state.learning_rate.numpy()),
        )
        return path

    def _restore(self, path):
        if checkpoint_has(path, "schedule"):
            restore_checkpoint(self.checkpoint, path)
            return
        # Written before the plateau schedule and the optimiser's previous rate were
        # checkpointed: everything else must match; those two start from the state.
        legacy = tf.train.Checkpoint(model=self.model, state=self.state)
        restore_checkpoint(legacy, path)
        restore_checkpoint(self.checkpoint, path, partial=True)
        self.optimizer.previous_learning_rate.assign(self.state.learning_rate)
        self.schedule.best.assign(self.state.best_valid_loss)

    def save(self, best=False):
        path = self.manager.save(checkpoint_number=self.state.step)
        if best:
            self.best_manager.save(checkpoint_number=self.state.step)
        if not self.is_chief:
            shutil.rmtree(self._write_dir, ignore_errors=True)
        return path

    # --------------------------------------------------------------- training
    def _should_stop(self):
        config = self.config
        if config.max_steps and int(self.state.step.numpy()) >= config.max_steps:
            return "reached max_steps"
        if config.max_epochs and int(self.state.epoch.numpy()) >= config.max_epochs:
            return "reached max_epochs"
        if float(self.state.learning_rate.numpy()) <= config.min_learning_rate:
            return f"learning rate reached the floor {config.min_learning_rate:g}"
        if self.stop_condition is not None and self.stop_condition():
            return "reached the time limit"
        return None

    def _record_step(self, result):
        if bool(result["applied"]):
            self._nonfinite_in_a_row = 0
            return
        self._nonfinite_in_a_row += 1
        logging.warning(
            "Step %d: loss %s, gradient norm %s is not finite; update skipped (%d in a row).",
            int(self.state.step.numpy()),
            float(result["loss"]),
            float(result["gradient_norm"]),
            self._nonfinite_in_a_row,
        )
        if self._nonfinite_in_a_row >= self.config.max_nonfinite_steps:
            raise TrainingDivergedError(
                f"{self._nonfinite_in_a_row} consecutive updates had a NaN or infinite loss or "
                f"gradient (last at step {int(self.state.step.numpy())}); training stopped. "
                "Lower the learning rate or clip_norm, or check the data."
            )

    def train(self, train_dataset_fn, valid_dataset=None, steps_per_epoch=None):
        """Trains until max_steps, max_epochs or the learning rate floor.

        Args:
            train_dataset_fn: `(epoch, input_context) -> tf.data.Dataset` giving one epoch
                of per-replica batches for 1-based `epoch`; called again every epoch.
            valid_dataset: Evaluation batches (with `source_text`/`reference_text`) or None.
            steps_per_epoch: Batches per epoch per replica, if known (progress bar, and the
                epoch length of multi-worker training, whose datasets are repeated so
                every worker runs the same number of steps).

        Returns:
            A dict of the final state and last validation results.
        """
        self.restore_or_initialize()
        if self.is_chief:
            self.summaries.hparams(self.hparams)
        multi_worker = isinstance(self.strategy, tf.distribute.MultiWorkerMirroredStrategy)
        if multi_worker and not steps_per_epoch:
            raise ValueError("Multi-worker training needs steps_per_epoch.")
        last_valid = {}
        stop_reason = self._should_stop()
        while stop_reason is None:
            epoch = int(self.state.epoch.numpy()) + 1
            skip = int(self.state.epoch_batches.numpy())

            def dataset_fn(input_context, epoch=epoch, skip=skip):
                dataset = train_dataset_fn(epoch, input_context)
                if multi_worker:
                    dataset = dataset.repeat()
                return dataset.skip(skip)

            distributed = self.strategy.distribute_datasets_from_function(dataset_fn)
            if self._train_step is None and self._accumulate_step is None:
                self._build_steps(distributed.element_spec)
            stop_reason = self._train_epoch(epoch, distributed, steps_per_epoch, skip)
            if stop_reason is not None:
                # Stopped inside the epoch: validate, log and checkpoint as at an epoch
                # end (the epoch stays open, so a resumed run finishes it).
                batches = int(self.state.epoch_batches.numpy())
                complete = bool(steps_per_epoch) and batches >= steps_per_epoch
                last_valid = self._end_epoch(epoch, valid_dataset, complete=complete)
                break
            last_valid = self._end_epoch(epoch, valid_dataset)
            stop_reason = self._should_stop()
        logging.info("Training stopped: %s.", stop_reason)
        self.summaries.flush()
        return {
            "step": int(self.state.step.numpy()),
            "epoch": int(self.state.epoch.numpy()),
            "learning_rate": float(self.state.learning_rate.numpy()),
            "stop_reason": stop_reason,
            **last_valid,
        }

    def _train_epoch(self, epoch, distributed, steps_per_epoch, skip):
        config = self.config
        target = steps_per_epoch
        progress = (
            keras.utils.Progbar(target, stateful_metrics=["loss", "tok/s", "lr"], unit_name="batch")
            if config.progress_bar and self.is_chief
            else None
        )
        window_tokens, window_start = 0.0, time.time()
        epoch_tokens, epoch_start = 0.0, time.time()
        batches = skip
        micro_batches = 0
        iterator = iter(distributed)
        while steps_per_epoch is None or batches < steps_per_epoch:
            try:
                batch = next(iterator)
            except StopIteration:
                break
            batches += 1
            if self.accumulators is None:
                result = self._train_step(batch)
            else:
                self._accumulate_step(batch)
                micro_batches += 1
                if micro_batches % config.update_freq:
                    continue
                result = self._apply_accumulated()
            self.state.epoch_batches.assign(batches)
            self._record_step(result)
            tokens = float(result["tokens"])
            window_tokens += tokens
            epoch_tokens += tokens
            step = int(self.state.step.numpy())
            if step % config.log_every_steps == 0:
                elapsed = max(time.time() - window_start, 1e-9)
                self._log_train(result, window_tokens / elapsed)
                window_tokens, window_start = 0.0, time.time()
            if progress is not None:
                rate = epoch_tokens / max(time.time() - epoch_start, 1e-9)
                progress.update(
                    batches,
                    values=[
                        ("loss", float(result["loss"])),
                        ("tok/s", round(rate)),
                        ("lr", float(self.state.learning_rate.numpy())),
                    ],
                )
            if config.save_every_steps and step % config.save_every_steps == 0:
                self.save()
            if config.max_steps and step >= config.max_steps:
                self._epoch_train_rate = epoch_tokens / max(time.time() - epoch_start, 1e-9)
                return "reached max_steps"
        if self.accumulators is not None and micro_batches % config.update_freq:
            # The epoch's last micro-batches still make one (smaller) update.
            self._record_step(self._apply_accumulated())
        self._epoch_train_rate = epoch_tokens / max(time.time() - epoch_start, 1e-9)
        return None

    def _log_train(self, result, tokens_per_second):
        nll = float(result["nll"])
        self.summaries.scalars(
            "train",
            int(self.state.step.numpy()),
            {
                "loss": float(result["loss"]),
                "perplexity": math.exp(min(nll, 50.0)),
                "learning_rate": float(self.state.learning_rate.numpy()),
                "gradient_norm": float(result["gradient_norm"]),
                "tokens_per_second": tokens_per_second,
            },
        )

    # ------------------------------------------------------------- validation
    def _end_epoch(self, epoch, valid_dataset, complete=True):
        """Validates, logs and checkpoints; `complete=False` when training stops inside
        the epoch (no annealing step then, as in fairseq, and the epoch stays open)."""
        results = {}
        improved_loss = False
        validation_seconds = None
        if valid_dataset is not None:
            started = time.time()
            results = self.validate(valid_dataset)
            validation_seconds = time.time() - started
            loss, nll = results["valid_loss"], results["valid_nll"]
            improved_loss = loss < float(self.state.best_valid_loss.numpy())
            if improved_loss:
                self.state.best_valid_loss.assign(loss)
            self.state.best_valid_nll.assign(min(nll, float(self.state.best_valid_nll.numpy())))
            if complete:
                self._anneal(loss)
        if complete:
            self.state.epoch.assign(epoch)
            self.state.epoch_batches.assign(0)
        self.save(best=improved_loss)
        step = int(self.state.step.numpy())
        if self.is_chief:
            self.summaries.histograms("train", step, self.model.trainable_variables)
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
        if self.is_chief:
            print(summary, flush=True)
        logging.info(summary)
        return results

    def _anneal(self, valid_loss):
        rate = float(self.state.learning_rate.numpy())
        new_rate = self.schedule.step(valid_loss, rate)
        if new_rate != rate:
            # The optimiser rescales its velocity to the new rate at the next update.
            self.state.learning_rate.assign(new_rate)
            self.optimizer.learning_rate.assign(new_rate)
            logging.info("Validation loss did not improve: learning rate %g -> %g.", rate, new_rate)

    def _search_fn(self):
        if self._search is None:
            search_config = SearchConfig(beam_size=max(self.config.valid_beam_size, 1))
            self._search = best_hypothesis_function(self.model, search_config)
        return self._search

    def validate(self, valid_dataset):
        """Validation loss, perplexity and (with a tokenizer) BLEU, logged to TensorBoard."""
        sums = np.zeros(3)
        hypotheses, references, sources = [], [], []
        decode = self.tokenizer is not None and self.config.valid_beam_size > 0
        limit = self.config.valid_bleu_sentences
        evaluate = self._evaluate_fn()
        for batch in valid_dataset:
            sums += evaluate(batch["source"], batch["target_input"], batch["target"]).numpy()
            if decode and (not limit or len(hypotheses) < limit):
                tokens, _ = self._search_fn()(batch["source"])
                hypotheses += self._decode_text(tokens)
                references += [t.decode("utf-8") for t in batch["reference_text"].numpy()]
                sources += [t.decode("utf-8") for t in batch["source_text"].numpy()]
        tokens = max(sums[2], 1.0)
        results = {
            "valid_loss": float(sums[0] / tokens),
            "valid_nll": float(sums[1] / tokens),
        }
        results["valid_perplexity"] = math.exp(min(results["valid_nll"], 50.0))
        step = int(self.state.step.numpy())
        scalars = {"loss": results["valid_loss"], "perplexity": results["valid_perplexity"]}
        if decode:
            if limit:
                hypotheses, references, sources = (
                    hypotheses[:limit],
                    references[:limit],
                    sources[:limit],
                )
            scores = corpus_scores(hypotheses, references)
            results["valid_bleu"] = scores["bleu"]
            results["valid_bleu_signature"] = scores["bleu_signature"]
            scalars["bleu"] = scores["bleu"]
            if self.is_chief:
                self.summaries.translations(
                    "valid", step, sources, hypotheses, references, self.config.sample_sentences
                )
                self._log_attention(valid_dataset, step)
        self.summaries.scalars("valid", step, scalars)
        return results

    def _evaluate_fn(self):
        if self._evaluate is None:
            spec = tf.TensorSpec([None, None], tf.int32)

            @tf.function(input_signature=[spec, spec, spec])
            def evaluate(source, target_input, target):
                batch = {"source": source, "target_input": target_input, "target": target}
                return tf.stack(self._loss_sums(batch, training=False))

            self._evaluate = evaluate
        return self._evaluate

    def _decode_text(self, tokens):
        return [t.decode("utf-8") for t in self.tokenizer.decode(tokens).numpy()]

    def _log_attention(self, valid_dataset, step):
        count = self.config.attention_sentences
        if not count:
            return
        batch = next(iter(valid_dataset))
        source = batch["source"][:count]
        tokens, lengths = self._search_fn()(source)
        # Teacher-force the hypotheses to get every block's attention over them.
        decoder_input = tf.concat([tf.fill([tf.shape(tokens)[0], 1], EOS_ID), tokens[:, :-1]], 1)
        _, per_block = self.model.decoder(
            decoder_input, self.model.encode(source), return_attention="per_block"
        )
        for row in range(int(tf.shape(source)[0])):
            source_ids = [int(t) for t in source[row].numpy() if t != self.model.decoder.pad_id]
            target_ids = [int(t) for t in tokens[row, : int(lengths[row])].numpy()]
            source_pieces = _pieces(self.tokenizer, source_ids)
            target_pieces = _pieces(self.tokenizer, target_ids)
            source_columns = [
                i for i, t in enumerate(source[row].numpy()) if t != self.model.decoder.pad_id
            ]
            for block, weights in zip(self._attention_block_indices(), per_block):
                matrix = weights[row].numpy()[: len(target_ids)][:, source_columns]
                self.summaries.attention_image(
                    "valid",
                    step,
                    f"attention/sentence_{row}/block_{block}",
                    matrix,
                    source_pieces,
                    target_pieces,
                )

    def _attention_block_indices(self):
        return [i for i, has in enumerate(self.model.decoder.attention_spec) if has]

    def write_run_config(self, run_config):
        """Writes the model and data configuration next to the checkpoints (chief only).

        Raises:
            ValueError: if the directory already holds a run with another model config,
                other prepared data or another vocabulary.
        """
        path = os.path.join(self.model_dir, "config.json")
        if tf.io.gfile.exists(path):
            with tf.io.gfile.GFile(path) as f:
                existing = json.load(f)
            _check_same_run(path, existing, run_config)
        if self.is_chief:
            tf.io.gfile.makedirs(self.model_dir)
            with tf.io.gfile.GFile(path + ".tmp", "w") as f:
                json.dump(run_config, f, indent=2, sort_keys=True)
            tf.io.gfile.rename(path + ".tmp", path, overwrite=True)


# What a resumed run must share with the one that wrote the directory, and what the
# flags change when it differs (run directories written before a key existed lack it).
_RUN_IDENTITY = {
    "model": "another model (--arch and the model flags)",
    "data_fingerprint": "other prepared data (--data_dir and its preparation flags)",
    "vocabulary_sha256": "another SentencePiece vocabulary",
}


def _check_same_run(path, existing, run_config):
    for key, what in _RUN_IDENTITY.items():
        if key in existing and key in run_config and existing[key] != run_config[key]:
            raise ValueError(
                f"{path} describes {what} than the flags ask for (stored {key}="
                f"{existing[key]}, now {run_config[key]}): resuming would mix them. Use a new "
                "--model_dir, or the original flags and data."
            )


def _pieces(tokenizer, ids):
    return [piece.decode("utf-8") for piece in tokenizer.id_to_piece(ids).numpy()]


def config_as_dict(config):
    return dataclasses.asdict(config)


__all__ = ["CheckpointError", "Trainer", "TrainingDivergedError", "config_as_dict"]
