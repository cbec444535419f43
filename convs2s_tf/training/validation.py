"""Validation during training: loss, perplexity, BLEU, sample translations, attention."""

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from convs2s_tf.decoding import SearchConfig, best_hypothesis_function
from convs2s_tf.evaluation import corpus_scores
from convs2s_tf.training.config import TrainingConfig
from convs2s_tf.training.coordination import Preempted
from convs2s_tf.training.losses import batch_loss_sums
from convs2s_tf.training.summaries import SummaryLogger
from convs2s_tf.vocabulary import EOS_ID

_IDS = tf.TensorSpec([None, None], tf.int32)


class Validator:
    """Scores a model on validation batches and logs the results to TensorBoard.

    The loss is the training loss without dropout; with a tokenizer and a validation
    beam, sentences are also translated for BLEU, and the chief logs sample
    translations and the attention of a few fixed sentences.

    Args:
        model: The model being trained.
        config: The run's `TrainingConfig` (label smoothing, beam, sentence counts).
        summaries: The run's `SummaryLogger`.
        tokenizer: Target-side tokenizer with `decode` and `id_to_piece`; None skips
            BLEU, samples and attention images.
        is_chief: Whether this worker writes translations and images.
    """

    def __init__(
        self,
        model: Any,
        config: TrainingConfig,
        summaries: SummaryLogger,
        tokenizer: Any = None,
        is_chief: bool = True,
    ) -> None:
        self.model = model
        self.config = config
        self.summaries = summaries
        self.tokenizer = tokenizer
        self.is_chief = is_chief
        self.decodes = tokenizer is not None and config.valid_beam_size > 0
        self._loss_sums = tf.function(
            self._loss_sums_fn, input_signature=[_IDS, _IDS, _IDS], autograph=False
        )
        # A tf.function traces at its first call: creating it costs nothing.
        self._search = best_hypothesis_function(
            model, SearchConfig(beam_size=max(config.valid_beam_size, 1))
        )

    def _loss_sums_fn(
        self, source: tf.Tensor, target_input: tf.Tensor, target: tf.Tensor
    ) -> tf.Tensor:
        batch = {"source": source, "target_input": target_input, "target": target}
        sums = batch_loss_sums(
            self.model,
            batch,
            self.config.label_smoothing,
            training=False,
            static_shapes=self.config.xla,
        )
        return tf.stack(sums)

    def validate(
        self,
        valid_dataset: tf.data.Dataset,
        step: int,
        should_stop: Callable[[], bool] | None = None,
    ) -> dict[str, Any]:
        """Validation loss, perplexity and (with a tokenizer) BLEU, logged at `step`.

        Args:
            valid_dataset: Evaluation batches with `source_text` and `reference_text`.
            step: The training step to log at.
            should_stop: Optional callable checked between batches (their loss, their
                translations, the attention plots); True abandons the pass.

        Returns:
            A dict of `valid_loss`, `valid_nll`, `valid_perplexity` and, when decoding,
            `valid_bleu` and `valid_bleu_signature`.

        Raises:
            Preempted: `should_stop` held: the pass is abandoned (its scalars unlogged).
        """
        check = _stop_check(should_stop)
        sums = np.zeros(3)
        hypotheses: list[str] = []
        references: list[str] = []
        sources: list[str] = []
        limit = self.config.valid_bleu_sentences
        for batch in valid_dataset:
            check()
            sums += self._loss_sums(batch["source"], batch["target_input"], batch["target"]).numpy()
            if self.decodes and (not limit or len(hypotheses) < limit):
                check()
                tokens, _ = self._search(batch["source"])
                hypotheses += self._decode_text(tokens)
                references += [t.decode("utf-8") for t in batch["reference_text"].numpy()]
                sources += [t.decode("utf-8") for t in batch["source_text"].numpy()]
        tokens = max(sums[2], 1.0)
        results: dict[str, Any] = {
            "valid_loss": float(sums[0] / tokens),
            "valid_nll": float(sums[1] / tokens),
        }
        results["valid_perplexity"] = math.exp(min(results["valid_nll"], 50.0))
        scalars = {"loss": results["valid_loss"], "perplexity": results["valid_perplexity"]}
        if self.decodes:
            if limit:
                hypotheses, references, sources = (
                    hypotheses[:limit],
                    references[:limit],
                    sources[:limit],
                )
            check()
            scores = corpus_scores(hypotheses, references)
            results["valid_bleu"] = scores["bleu"]
            results["valid_bleu_signature"] = scores["bleu_signature"]
            scalars["bleu"] = scores["bleu"]
            if self.is_chief:
                self.summaries.translations(
                    "valid", step, sources, hypotheses, references, self.config.sample_sentences
                )
                self._log_attention(valid_dataset, step, check)
        self.summaries.scalars("valid", step, scalars)
        return results

    def _decode_text(self, tokens: tf.Tensor) -> list[str]:
        return [t.decode("utf-8") for t in self.tokenizer.decode(tokens).numpy()]

    def _pieces(self, ids: Sequence[int]) -> list[str]:
        return [piece.decode("utf-8") for piece in self.tokenizer.id_to_piece(ids).numpy()]

    def _log_attention(
        self, valid_dataset: tf.data.Dataset, step: int, check: Callable[[], None]
    ) -> None:
        """Plots every attention block over the first validation sentences' translations
        (`check` raises `Preempted` before the search if asked to stop)."""
        count = self.config.attention_sentences
        if not count:
            return
        check()
        pad_id = self.model.decoder.pad_id
        source = _first_sources(valid_dataset, count, pad_id)
        tokens, lengths = self._search(source)
        # Teacher-force the hypotheses to get every block's attention over them.
        decoder_input = tf.concat([tf.fill([tf.shape(tokens)[0], 1], EOS_ID), tokens[:, :-1]], 1)
        maps = self.model.attention_maps(source, decoder_input)
        for row in range(int(tf.shape(source)[0])):
            source_row = source[row].numpy()
            source_columns = [i for i, t in enumerate(source_row) if t != pad_id]
            source_pieces = self._pieces([int(source_row[i]) for i in source_columns])
            target_ids = [int(t) for t in tokens[row, : int(lengths[row])].numpy()]
            target_pieces = self._pieces(target_ids)
            for name, weights in maps:
                matrix = weights[row].numpy()[: len(target_ids)][:, source_columns]
                self.summaries.attention_image(
                    "valid",
                    step,
                    f"attention/sentence_{row}/{name}",
                    matrix,
                    source_pieces,
                    target_pieces,
                )


def _first_sources(valid_dataset: tf.data.Dataset, count: int, pad_id: int) -> tf.Tensor:
    """The first `count` sources of `valid_dataset` (fewer if it holds fewer), `pad_id`
    padded to one width: they may span batches, since a length bucket's batch can hold
    fewer sentences than `count`."""
    rows: list[np.ndarray] = []
    for batch in valid_dataset:
        rows.extend(batch["source"].numpy()[: count - len(rows)])
        if len(rows) == count:
            break
    width = max(len(row) for row in rows)
    return tf.constant(
        np.stack([np.pad(row, (0, width - len(row)), constant_values=pad_id) for row in rows])
    )


def _stop_check(should_stop: Callable[[], bool] | None) -> Callable[[], None]:
    """A function that raises `Preempted` if `should_stop` (if any) holds."""

    def check() -> None:
        if should_stop is not None and should_stop():
            raise Preempted("validation abandoned: asked to stop")

    return check
