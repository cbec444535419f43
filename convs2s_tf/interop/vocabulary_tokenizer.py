"""Text <-> ids through token vocabularies, for models whose ids are not SentencePiece's.

An imported fairseq model numbers its tokens by its own dictionaries (separate for
source and target unless they were joined). `VocabularyTokenizer` maps text onto those
ids in-graph, in one of two ways:

* pre-tokenised text (no SentencePiece model): a line is space-separated dictionary
  tokens (e.g. Moses-tokenised, BPE-split words `the@@ re`), exactly what fairseq reads;
  the output is the target tokens joined by spaces, unmerged;
* plain text with the SentencePiece model the fairseq data was segmented with: its
  pieces are looked up in the source dictionary, and the target tokens are turned back
  into SentencePiece ids and detokenised.

Tokens missing from the source dictionary become `<unk>`, as in fairseq; so do the four
special tokens when they appear as text. It offers the methods of
`convs2s_tf.data.tokenizer.Tokenizer` that translation uses (`encode`, `decode`,
`id_to_piece`), so `TranslationModule`, `Translator` and the SavedModel export take it
in place of a `Tokenizer`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import tensorflow as tf

from convs2s_tf import vocabulary
from convs2s_tf.interop.fairseq_dictionary import SPECIAL_SYMBOLS, Dictionary
from convs2s_tf.runs import RunDirectory, VocabularyFiles

_WHITESPACE = r"[\s\p{Z}\x{1c}-\x{1f}\x{85}]+"


class VocabularyError(ValueError):
    """A vocabulary that does not fit the model it is meant for."""


class VocabularyTokenizer(tf.Module):
    """Maps text to source ids and target ids back to text (see the module docstring).

    Args:
        source_dictionary: The source `Dictionary` (fairseq's ids).
        target_dictionary: The target `Dictionary`.
        sentencepiece_proto: Serialized SentencePiece model that segments plain text into
            the dictionaries' tokens; None for pre-tokenised text.
        name: Module name.

    Attributes:
        pretokenized: True when lines are read and written as space-separated tokens.
        vocab_size: Target vocabulary size (what `decode` accepts).
        source_vocab_size: Source vocabulary size.

    Example:

    >>> tokenizer = VocabularyTokenizer(Dictionary.from_tokens(["a", "b"]),
    ...                                 Dictionary.from_tokens(["x", "y"]))
    >>> tokenizer.encode(tf.constant(["a b c"])).to_list()
    [[4, 5, 3]]
    >>> tokenizer.decode(tf.constant([[5, 4, 2, 1]])).numpy().tolist()
    [b'y x']
    """

    def __init__(
        self,
        source_dictionary: Dictionary,
        target_dictionary: Dictionary,
        sentencepiece_proto: bytes | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        self.source_vocab_size = len(source_dictionary)
        self.vocab_size = len(target_dictionary)
        self.pretokenized = sentencepiece_proto is None
        items = [
            (token, index)
            for token, index in source_dictionary.lookup_items()
            if token not in SPECIAL_SYMBOLS
        ]
        keys = tf.constant([token for token, _ in items] or [""], tf.string)
        values = tf.constant([index for _, index in items] or [vocabulary.UNK_ID], tf.int32)
        self._source_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(keys, values), default_value=vocabulary.UNK_ID
        )
        self._source_symbols = tf.constant(source_dictionary.symbols, tf.string)
        self._target_symbols = tf.constant(target_dictionary.symbols, tf.string)
        self._sentencepiece = None
        if sentencepiece_proto is not None:
            self._sentencepiece = _string_sentencepiece(sentencepiece_proto)

    @classmethod
    def from_files(
        cls, source_dict: str, target_dict: str, sentencepiece_model: str | None = None
    ) -> VocabularyTokenizer:
        """Builds it from dict.txt files and an optional SentencePiece model file."""
        proto = None
        if sentencepiece_model:
            if not tf.io.gfile.exists(sentencepiece_model):
                raise FileNotFoundError(
                    f"SentencePiece model {sentencepiece_model} does not exist."
                )
            with tf.io.gfile.GFile(sentencepiece_model, "rb") as f:
                proto = f.read()
        return cls(Dictionary.load(source_dict), Dictionary.load(target_dict), proto)

    def _pieces(self, texts: tf.Tensor) -> tf.RaggedTensor:
        if self._sentencepiece is not None:
            return self._sentencepiece.tokenize(texts)
        # Python's (and so fairseq's) whitespace, beyond the ASCII set tf.strings.split uses.
        texts = tf.strings.regex_replace(texts, _WHITESPACE, " ")
        return tf.strings.split(texts)

    def encode(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """Source ids (`[B, None]` int32 ragged, no `</s>`) of the strings `texts` `[B]`."""
        pieces = self._pieces(texts)
        return pieces.with_flat_values(self._source_table.lookup(pieces.flat_values))

    def decodable_mask(self, ids: tf.Tensor) -> tf.Tensor:
        """Which ids of dense `[B, T]` `ids` are output: before the first `</s>`, neither
        `<pad>` nor `<s>` (fairseq's `Dictionary.string` drops `<s>` too)."""
        ids = tf.convert_to_tensor(ids)
        before_eos = tf.equal(
            tf.cumsum(tf.cast(tf.equal(ids, vocabulary.EOS_ID), tf.int32), axis=-1), 0
        )
        not_special = tf.logical_and(
            tf.not_equal(ids, vocabulary.PAD_ID), tf.not_equal(ids, vocabulary.BOS_ID)
        )
        return before_eos & not_special

    def decode(self, ids: tf.Tensor | tf.RaggedTensor) -> tf.Tensor:
        """The text of target `ids` (`[B, T]`, or `[T]` for one sentence), cut at `</s>`:
        tokens joined by spaces, or detokenised by the SentencePiece model."""
        if isinstance(ids, tf.RaggedTensor):
            ids = ids.to_tensor(default_value=vocabulary.PAD_ID)
        ids = tf.cast(tf.convert_to_tensor(ids), tf.int32)
        if ids.shape.rank == 1:
            return self.decode(ids[tf.newaxis])[0]
        kept = tf.ragged.boolean_mask(ids, self.decodable_mask(ids))
        tokens = self.id_to_piece(kept)
        if self._sentencepiece is None:
            return tf.strings.reduce_join(tokens, axis=-1, separator=" ")
        piece_ids = tokens.with_flat_values(self._sentencepiece.string_to_id(tokens.flat_values))
        return self._sentencepiece.detokenize(piece_ids)

    def _symbols(
        self, table: tf.Tensor, size: int, ids: tf.Tensor | tf.RaggedTensor
    ) -> tf.Tensor | tf.RaggedTensor:
        if isinstance(ids, tf.RaggedTensor):
            return ids.with_flat_values(self._symbols(table, size, ids.flat_values))
        ids = tf.cast(tf.convert_to_tensor(ids), tf.int32)
        safe = tf.where(tf.logical_and(ids >= 0, ids < size), ids, vocabulary.UNK_ID)
        return tf.gather(table, safe)

    def id_to_piece(self, ids: tf.Tensor | tf.RaggedTensor) -> tf.Tensor | tf.RaggedTensor:
        """The target tokens of `ids` (any shape); ids outside the vocabulary give `<unk>`."""
        return self._symbols(self._target_symbols, self.vocab_size, ids)

    def source_id_to_piece(self, ids: tf.Tensor | tf.RaggedTensor) -> tf.Tensor | tf.RaggedTensor:
        """The source tokens of `ids` (any shape); ids outside the vocabulary give `<unk>`."""
        return self._symbols(self._source_symbols, self.source_vocab_size, ids)


def _string_sentencepiece(model_proto: bytes) -> Any:
    """A tf-text SentencePiece tokenizer yielding piece strings, its resource shared by
    name as `convs2s_tf.data.tokenizer.Tokenizer` does (it survives kernel-cache resets)."""
    import tensorflow_text as tf_text

    from convs2s_tf.data.tokenizer import _SharedSentencepieceResource

    tokenizer = tf_text.SentencepieceTokenizer(
        model=model_proto, out_type=tf.string, add_bos=False, add_eos=False
    )
    if hasattr(tokenizer, "_model_resource"):
        tokenizer._model_resource = _SharedSentencepieceResource(model_proto)
    return tokenizer


def _vocabulary_files(model_dir: str, run_config: Mapping[str, Any]) -> VocabularyFiles:
    files = RunDirectory(model_dir).vocabulary_files(run_config)
    if files is None:
        raise VocabularyError(
            f"{model_dir} names no token vocabularies: its ids are its SentencePiece model's."
        )
    return files


def run_dictionaries(model_dir: str, run_config: Mapping[str, Any]) -> tuple[str, str]:
    """The paths of the source and target dict.txt of a run with token vocabularies.

    Raises:
        VocabularyError: The run names no token vocabularies.
    """
    files = _vocabulary_files(model_dir, run_config)
    return files.source, files.target


def tokenizer_for_run(
    model_dir: str, run_config: Mapping[str, Any], sentencepiece_model: str | None = None
) -> VocabularyTokenizer:
    """The `VocabularyTokenizer` of a run whose config names token vocabularies.

    Args:
        model_dir: The run directory (relative vocabulary paths resolve against it).
        run_config: Its `config.json` content, with a `"vocabulary"` entry.
        sentencepiece_model: None for the run's own SentencePiece model (if any), "" for
            none (pre-tokenised text), or a path.

    Raises:
        VocabularyError: The run names no token vocabularies, or they do not match the
            model's sizes.
    """

    files = _vocabulary_files(model_dir, run_config)
    if sentencepiece_model is None:
        sentencepiece_model = files.sentencepiece_model
    tokenizer = VocabularyTokenizer.from_files(
        files.source, files.target, sentencepiece_model or None
    )
    model = run_config["model"]
    for side, path, size, expected in (
        ("source", files.source, tokenizer.source_vocab_size, model["source_vocab_size"]),
        ("target", files.target, tokenizer.vocab_size, model["target_vocab_size"]),
    ):
        if size != expected:
            raise VocabularyError(
                f"The {side} vocabulary {path} of {model_dir} has {size} tokens but the "
                f"model has {expected}."
            )
    return tokenizer
