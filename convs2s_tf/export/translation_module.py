"""The exported translators: `tf.Module`s whose signatures run the beam search in core TF
and tf-text ops (strings or token ids in, translations out)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import tensorflow as tf

from convs2s_tf.decoding import Ensemble, SearchConfig, beam_search
from convs2s_tf.decoding.beam_search import SearchOutput
from convs2s_tf.decoding.compiled_search import BucketedSearch, SearchBuckets
from convs2s_tf.decoding.inference_model import make_inference_model
from convs2s_tf.layers import fold_kernels
from convs2s_tf.layers.folded_kernels import foldable_layers
from convs2s_tf.layers.int8_kernel import Int8Kernel, graph_mode_kernels
from convs2s_tf.shortlist.shortlist import Shortlist, ShortlistTable
from convs2s_tf.vocabulary import EOS_ID, PAD_ID

if TYPE_CHECKING:
    from convs2s_tf.data.tokenizer import Tokenizer
    from convs2s_tf.interop.vocabulary_tokenizer import VocabularyTokenizer
    from convs2s_tf.models import ConvS2S

TEXT_SPEC = tf.TensorSpec([None], tf.string, name="text")
IDS_SPEC = tf.TensorSpec([None, None], tf.int32, name="source_ids")
# A search's input: ids ending in `</s>`, pad-filled, as `encode_text` makes them.
FINISHED_IDS_SPEC = tf.TensorSpec([None, None], tf.int32, name="source")
# The SavedModel signature names (what TF Serving clients ask for).
TRANSLATE_SIGNATURE = "serving_default"
NBEST_SIGNATURE = "translate_nbest"
IDS_SIGNATURE = "translate_ids"
ATTENTION_SIGNATURE = "translate_with_attention"
# The signatures are traced with autograph=False: the search is written in TensorFlow's
# own control flow (tf.while_loop and the like), so AutoGraph would convert nothing,
# yet converting every function the search calls would be most of a signature's trace
# time (the graph is the same op for op; docs/performance.md).


class TranslationModule(tf.Module):
    """A `ConvS2S` model, its SentencePiece tokenizer and a beam search, for SavedModels.

    Every input is handled: text is re-encoded as UTF-8 with invalid bytes replaced by
    U+FFFD, empty strings translate like a lone `</s>`, unseen characters become `<unk>`,
    and sources longer than the model's positions are truncated to their first
    `max_length - 1` pieces (then `</s>`), so no element of a batch can fail another.

    Args:
        model: A built `ConvS2S`, or an `Ensemble` of them (all its members' variables
            are the module's).
        tokenizer: The `Tokenizer` of the model's vocabulary.
        search_config: A `SearchConfig` (default: its defaults); `nbest` is ignored
            (`translate_nbest` returns the whole beam) and `dtype` is the model's.
        buckets: `SearchBuckets`: batches that fit one are searched by one XLA
            computation per bucket (`BucketedSearch`; every bucket must be warmed up
            before serving, or the first request of each compiles it); None: every
            search in graph mode.
        shortlist: A `Shortlist` every batch is decoded against (its tables become
            variables of the module), or None: the whole vocabulary.

    The weight-normalised kernels are folded (`g * v / ||v||`, and a shared output
    table transposed) into variables when the module is built, so it translates with the
    weights the model had then; with `search_config.int8_weights` they are held as
    `Int8Kernel`s (int8 values and a scale per column). A SavedModel of the module stores
    those and the model's other variables, each once; `v` and `g` are not stored (the
    run's checkpoints keep them).
    """

    def __init__(
        self,
        model: ConvS2S | Ensemble,
        tokenizer: Tokenizer | VocabularyTokenizer | None,
        search_config: SearchConfig | None = None,
        buckets: SearchBuckets | None = None,
        shortlist: Shortlist | None = None,
    ) -> None:
        super().__init__(name="convs2s_translator")
        self._set_model(model)
        self.tokenizer = tokenizer
        # The weight-normalised kernels g * v / ||v|| (and a shared output table,
        # transposed), folded once here rather than at every call: at batch 1 recomputing
        # them would be a quarter of a translation. Build the module once the weights are
        # final.
        search_config = (search_config or SearchConfig()).validate(model.decoder.max_length)
        self.folded_kernels = _kernel_variables(fold_kernels(model), search_config.int8_weights)
        # The model's other variables, as tf.Variables: session-based loaders (TF
        # Serving, saved_model_cli) only find variables reachable as such. The ones the
        # folded kernels stand for are never read by the signatures, so a SavedModel
        # stores each weight once (a shared output table twice: by rows for the
        # embedding, transposed for the projection).
        replaced = {id(v) for layer in foldable_layers(model) for v in layer.folded_variables}
        self.model_variables = [v.value for v in model.variables if id(v) not in replaced]
        self.search_config = search_config
        self.max_source_length = model.encoder.max_length
        self.buckets = buckets
        self.shortlist = ShortlistTable(shortlist) if shortlist is not None else None
        self._bucketed_search = (
            BucketedSearch(model, self.search_config, buckets, self.folded_kernels, self.shortlist)
            if buckets is not None
            else None
        )

    @property
    def bucketed_search(self) -> BucketedSearch | None:
        """The search of small batches in compiled buckets, or None without buckets."""
        return self._bucketed_search

    @tf.__internal__.tracking.no_automatic_dependency_tracking
    def _set_model(self, model: ConvS2S | Ensemble) -> None:
        # Not a dependency of the module: a SavedModel would store the Keras model's
        # variables a second time, beside `model_variables`.
        self.model = model

    # ------------------------------------------------------------- helpers
    def _text_tokenizer(self) -> Tokenizer | VocabularyTokenizer:
        """The tokenizer of the text signatures (a module made without one has none)."""
        if self.tokenizer is None:
            raise ValueError("This module has no tokenizer: it translates token ids only.")
        return self.tokenizer

    def encode_text(self, text: tf.Tensor) -> tf.Tensor:
        """`[batch]` strings -> `[batch, source]` int32 ids ending in `</s>`, pad-filled."""
        text = tf.strings.unicode_transcode(
            text, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
        )
        pieces = self._text_tokenizer().encode(text)
        return self._finish_source(pieces)

    def _finish_source(self, pieces: tf.RaggedTensor) -> tf.Tensor:
        # Keep room for </s> within the position table.
        pieces = pieces[:, : self.max_source_length - 1]
        eos = tf.fill([pieces.nrows(), 1], EOS_ID)
        pieces = tf.concat([pieces, tf.RaggedTensor.from_tensor(eos)], axis=1)
        return pieces.to_tensor(default_value=PAD_ID)

    def _search(
        self, source: tf.Tensor, nbest: int = 1, return_attention: bool = False
    ) -> SearchOutput:
        if self._bucketed_search is not None and not return_attention:
            return self._bucketed_search(source, nbest)
        # The folded variables, read once for the trace (int8 values as float32 in
        # graph mode).
        inference = make_inference_model(self.model, graph_mode_kernels(self.folded_kernels))
        return beam_search(
            inference,
            source,
            self.search_config.replace(nbest=nbest),
            return_attention=return_attention,
            shortlist=self.shortlist,
        )

    # One search behind `translate`, `translate_nbest` and `translate_ids`: each signature
    # calls this function, so a SavedModel holds (and a loader instantiates) its graph once
    # rather than once a signature, and a module traces it once.
    @tf.function(input_signature=[FINISHED_IDS_SPEC], autograph=False)
    def search_beam(self, source: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """The whole beam of `source` (`[batch, source]` ids ending in `</s>`, pad-filled):
        `(tokens [batch, beam, time], scores [batch, beam], lengths [batch, beam])`, best
        first."""
        output = self._search(source, nbest=self.search_config.beam_size)
        return output.tokens, output.scores, output.lengths

    def _best(self, source: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """The best hypothesis of each sentence: `(tokens [batch, time], score, length)`,
        its columns trimmed to the longest best hypothesis (as a 1-best search trims)."""
        tokens, scores, lengths = self.search_beam(source)
        width = tf.maximum(tf.reduce_max(lengths[:, 0]), 1)
        return tokens[:, 0, :width], scores[:, 0], lengths[:, 0]

    # ---------------------------------------------------------- signatures
    @tf.function(input_signature=[TEXT_SPEC], autograph=False)
    def translate(self, text: tf.Tensor) -> dict[str, tf.Tensor]:
        """The best translation of each string and its score."""
        tokens, score, _ = self._best(self.encode_text(text))
        return {"translation": self._text_tokenizer().decode(tokens), "score": score}

    @tf.function(input_signature=[TEXT_SPEC], autograph=False)
    def translate_nbest(self, text: tf.Tensor) -> dict[str, tf.Tensor]:
        """All `beam_size` hypotheses of each string, best first, with scores."""
        nbest = self.search_config.beam_size
        tokens, scores, _ = self.search_beam(self.encode_text(text))
        batch = tf.shape(tokens)[0]
        flat = tf.reshape(tokens, [batch * nbest, -1])
        translations = tf.reshape(self._text_tokenizer().decode(flat), [batch, nbest])
        return {"translations": translations, "scores": scores}

    @tf.function(input_signature=[IDS_SPEC], autograph=False)
    def translate_ids(self, source_ids: tf.Tensor) -> dict[str, tf.Tensor]:
        """Token ids in and out, for clients that tokenise themselves.

        `source_ids` holds one sentence per row without `</s>`, right-padded with
        `<pad>` (1); out-of-vocabulary ids become `<unk>`. Returns the best hypothesis'
        ids (ending in `</s>`, then `<pad>`), its length and score.
        """
        source_ids = tf.cast(source_ids, tf.int32)
        vocab_size = self.model.encoder.vocab_size
        valid = tf.logical_and(source_ids >= 0, source_ids < vocab_size)
        source_ids = tf.where(valid, source_ids, 3)
        mask = tf.logical_and(tf.not_equal(source_ids, PAD_ID), tf.not_equal(source_ids, EOS_ID))
        pieces = tf.ragged.boolean_mask(source_ids, mask)
        tokens, score, length = self._best(self._finish_source(pieces))
        return {"output_ids": tokens, "length": length, "score": score}

    @tf.function(input_signature=[TEXT_SPEC], autograph=False)
    def translate_with_attention(self, text: tf.Tensor) -> dict[str, tf.Tensor]:
        """The best translation with its attention (averaged over decoder blocks) and the
        source and target pieces labelling its axes; for a single ConvS2S also each
        attention block's map (`block_attention`, `[batch, blocks, target, source]`, the
        translation teacher-forced) and the blocks' indices (`attention_blocks`)."""
        tokenizer = self._text_tokenizer()
        source = self.encode_text(text)
        output = self._search(source, return_attention=True)
        assert output.attention is not None  # asked for
        tokens = output.tokens[:, 0]
        return {
            **self._block_attention(source, tokens, output.lengths[:, 0]),
            "translation": tokenizer.decode(tokens),
            "score": output.scores[:, 0],
            "attention": output.attention[:, 0],
            # Imported fairseq models may have separate source and target vocabularies.
            "source_pieces": getattr(tokenizer, "source_id_to_piece", tokenizer.id_to_piece)(
                source
            ),
            "target_pieces": tokenizer.id_to_piece(tokens),
            "source_length": tf.reduce_sum(tf.cast(source != PAD_ID, tf.int32), axis=1),
            "target_length": output.lengths[:, 0],
        }

    def _block_attention(
        self, source: tf.Tensor, tokens: tf.Tensor, lengths: tf.Tensor
    ) -> dict[str, tf.Tensor]:
        """Each attention block's map over `tokens` (the best hypotheses, `lengths` long),
        teacher-forced with the folded kernels, zero beyond each hypothesis' end as the
        search's attention is; none for an ensemble or a family without the maps."""
        from convs2s_tf.models import ConvS2S

        if not isinstance(self.model, ConvS2S):
            return {}
        kernels = make_inference_model(self.model, graph_mode_kernels(self.folded_kernels)).kernels
        start = tf.fill([tf.shape(tokens)[0], 1], EOS_ID)
        maps = self.model.attention_maps(source, tf.concat([start, tokens[:, :-1]], 1), kernels)
        blocks = [int(name.rsplit("_", 1)[1]) for name, _ in maps]
        within = tf.sequence_mask(lengths, tf.shape(tokens)[1], tf.float32)[:, None, :, None]
        stacked = tf.cast(tf.stack([weights for _, weights in maps], 1), tf.float32)
        return {
            "block_attention": stacked * within,
            "attention_blocks": tf.tile(tf.constant([blocks], tf.int32), [tf.shape(tokens)[0], 1]),
        }

    def signatures(self) -> dict[str, Callable[..., dict[str, tf.Tensor]]]:
        """The functions a SavedModel of this module serves, by signature name."""
        return {
            TRANSLATE_SIGNATURE: self.translate,
            NBEST_SIGNATURE: self.translate_nbest,
            IDS_SIGNATURE: self.translate_ids,
            ATTENTION_SIGNATURE: self.translate_with_attention,
        }


def _kernel_variables(
    kernels: list[tf.Tensor], int8_weights: bool
) -> list[tf.Variable] | list[Int8Kernel]:
    """The folded `kernels` as the module's variables: float, or as `Int8Kernel`s of an
    int8 and a float32 variable each."""
    if not int8_weights:
        return [tf.Variable(kernel, trainable=False, name="folded_kernel") for kernel in kernels]
    quantized = [Int8Kernel.quantize(kernel) for kernel in kernels]
    return [
        Int8Kernel(
            tf.Variable(kernel.values, trainable=False, name="folded_kernel_int8"),
            tf.Variable(kernel.scales, trainable=False, name="folded_kernel_scales"),
        )
        for kernel in quantized
    ]


class TokenIdsTranslationModule(TranslationModule):
    """`TranslationModule` without a tokenizer: its `translate_ids` signature only.

    For imported models that read text tokenised outside the graph. The text signatures
    need a tokenizer, so they are removed from the module (a SavedModel would otherwise
    trace them).
    """

    translate = None
    translate_nbest = None
    translate_with_attention = None

    def __init__(
        self,
        model: ConvS2S | Ensemble,
        search_config: SearchConfig | None = None,
        buckets: SearchBuckets | None = None,
        shortlist: Shortlist | None = None,
    ) -> None:
        super().__init__(model, None, search_config, buckets, shortlist)

    def signatures(self) -> dict[str, Callable[..., dict[str, tf.Tensor]]]:
        """The `translate_ids` signature alone."""
        return {IDS_SIGNATURE: self.translate_ids}
