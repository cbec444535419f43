"""In-graph SentencePiece tokenisation for tf.data, training and SavedModel export.

`Tokenizer` wraps ONE `tensorflow_text.SentencepieceTokenizer` per model (two instances of
one model inside a parallel map can give nondeterministic output); special tokens
are added with `tf.concat`, never by the tokenizer. It is a `tf.Module`: the serialized
model travels with it into SavedModels as a tracked resource, and every method works
eagerly, inside `tf.data` maps and inside `tf.function`s (no `py_function`).
"""

import hashlib

import sentencepiece as spm
import tensorflow as tf
import tensorflow_text as tf_text
from tensorflow.python.trackable import resource
from tensorflow_text.python.ops import sentencepiece_tokenizer as tf_text_sentencepiece

from convs2s_tf import vocabulary
from convs2s_tf.data.bpe import check_special_ids


class _SharedSentencepieceResource(resource.TrackableResource):
    """The SentencePiece model resource, registered under a name instead of kernel-private.

    tf-text's own resource belongs to the kernel that created it, and eager kernels are
    dropped whenever the kernel cache is cleared, e.g. by `tf.random.set_seed` or
    `keras.utils.set_random_seed`: the tokenizer then fails with "Resource ... does not
    exist". Named after the model's hash (and the fixed options every `Tokenizer` uses),
    the resource outlives its kernel and is found again by the next one.
    """

    def __init__(self, model_proto: bytes):
        super().__init__()
        self._model_proto = model_proto
        digest = hashlib.sha256(model_proto).hexdigest()[:24]
        self._shared_name = f"convs2s_tf_sentencepiece_{digest}_no_bos_no_eos"
        _ = self.resource_handle  # Creates the resource now, like tf-text does.

    def _create_resource(self) -> tf.Tensor:
        return tf_text_sentencepiece.gen_sentencepiece_tokenizer.sentencepiece_op(
            model=self._model_proto, shared_name=self._shared_name
        )


class Tokenizer(tf.Module):
    """Text <-> ids with a SentencePiece model trained by `convs2s_tf.data.bpe`.

    Attributes:
        vocab_size: number of ids (Python int), special tokens included.
        model_proto: the serialized SentencePiece model (bytes).
    """

    def __init__(
        self,
        model_path: str | None = None,
        *,
        model_proto: bytes | None = None,
        name: str | None = None,
    ) -> None:
        """Loads a model from `model_path` or from its serialized bytes `model_proto`.

        Raises:
            ValueError: neither or both given, or the model's special ids are not
                `<s>`=0, `<pad>`=1, `</s>`=2, `<unk>`=3.
        """
        super().__init__(name=name)
        if (model_path is None) == (model_proto is None):
            raise ValueError("Pass exactly one of model_path and model_proto.")
        if model_proto is None:
            with tf.io.gfile.GFile(model_path, "rb") as model_file:
                model_proto = model_file.read()
        processor = spm.SentencePieceProcessor(model_proto=model_proto)
        check_special_ids(processor)
        self.vocab_size = processor.get_piece_size()
        self.model_proto = model_proto
        self._sentencepiece = tf_text.SentencepieceTokenizer(
            model=model_proto, out_type=tf.int32, add_bos=False, add_eos=False
        )
        if not hasattr(self._sentencepiece, "_model_resource"):
            raise RuntimeError("Unsupported tensorflow-text: no SentencepieceTokenizer resource.")
        self._sentencepiece._model_resource = _SharedSentencepieceResource(model_proto)

    def encode(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """Returns the piece ids of `texts` without special tokens.

        Args:
            texts: tf.string of shape [B] (or a scalar, giving a dense [N] int32 tensor).

        Returns:
            int32 RaggedTensor [B, None].
        """
        return self._sentencepiece.tokenize(texts)

    def encode_with_eos(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """Returns the piece ids of `texts` [B] each followed by `</s>`, as [B, None] int32."""
        return append_eos(self.encode(texts))

    def decodable_mask(self, ids: tf.Tensor) -> tf.Tensor:
        """Returns which ids of dense [B, T] `ids` are text: before the first `</s>`, in the
        vocabulary, and neither `<pad>` nor `<s>`."""
        ids = tf.convert_to_tensor(ids)
        is_eos = tf.equal(ids, vocabulary.EOS_ID)
        before_eos = tf.equal(tf.cumsum(tf.cast(is_eos, tf.int32), axis=-1), 0)
        in_vocabulary = tf.logical_and(ids >= 0, ids < self.vocab_size)
        not_special = tf.logical_and(
            tf.not_equal(ids, vocabulary.PAD_ID), tf.not_equal(ids, vocabulary.BOS_ID)
        )
        return before_eos & in_vocabulary & not_special

    def decode(self, ids: tf.Tensor | tf.RaggedTensor) -> tf.Tensor:
        """Returns the text of `ids`, cut at the first `</s>`.

        `<pad>`, `<s>` and ids outside the vocabulary (e.g. -1 fillers) are dropped rather
        than failing detokenisation.

        Args:
            ids: integer ids, dense or ragged, of shape [B, T] (or [T] for one sentence).

        Returns:
            tf.string of shape [B] (or a scalar for [T] input).
        """
        if isinstance(ids, tf.RaggedTensor):
            ids = ids.to_tensor(default_value=vocabulary.PAD_ID)
        ids = tf.cast(tf.convert_to_tensor(ids), tf.int32)
        if ids.shape.rank == 1:
            return self.decode(ids[tf.newaxis])[0]
        kept_ids = tf.ragged.boolean_mask(ids, self.decodable_mask(ids))
        return self._sentencepiece.detokenize(kept_ids)

    def id_to_piece(self, ids: tf.Tensor | tf.RaggedTensor) -> tf.Tensor | tf.RaggedTensor:
        """Returns the piece strings of `ids` (any shape, dense or ragged); ids outside the
        vocabulary give `<unk>`. For display, e.g. attention heatmap axes."""
        if isinstance(ids, tf.RaggedTensor):
            return ids.with_flat_values(self.id_to_piece(ids.flat_values))
        ids = tf.cast(tf.convert_to_tensor(ids), tf.int32)
        in_vocabulary = tf.logical_and(ids >= 0, ids < self.vocab_size)
        safe_ids = tf.where(in_vocabulary, ids, vocabulary.UNK_ID)
        return self._sentencepiece.id_to_string(safe_ids)

    def piece_to_id(self, pieces: tf.Tensor | tf.RaggedTensor) -> tf.Tensor | tf.RaggedTensor:
        """Returns the ids of piece strings (unknown pieces give `<unk>`'s id)."""
        return self._sentencepiece.string_to_id(pieces)


def append_eos(ids: tf.RaggedTensor) -> tf.RaggedTensor:
    """Returns ragged int32 `ids` [B, None] with `</s>` appended to every row."""
    eos = tf.fill([ids.nrows(), 1], tf.constant(vocabulary.EOS_ID, tf.int32))
    return tf.concat(
        [ids, tf.RaggedTensor.from_tensor(eos, row_splits_dtype=ids.row_splits.dtype)], axis=1
    )
