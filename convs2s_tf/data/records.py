"""The prepared record format: one tokenised pair per `tf.train.Example` in TFRecord shards.

A record holds:

- "source", "target": int64 lists, the SentencePiece ids of each side without `</s>`
  (the pipelines append it, as they do to text they tokenise themselves);
- "index": int64, the pair's line in the prepared text of its split (`{split}.{lang}`),
  so a batch can be traced back to its sentences;
- evaluation splits only: "source_text", "reference_text", the prepared text (BLEU is
  scored on text, not ids).

Why TFRecord of `tf.train.Example`: tf.data reads it natively (parallel, by file, no
Python in the input pipeline), every TF tool can inspect it, and varint-coded ids take
1-3 bytes each. `encode_example` writes the protobuf wire format itself, so that the
worker processes of `pipelines.prepare_data` need SentencePiece only: importing
TensorFlow in each of them would cost seconds and hundreds of MB a process.
"""

from collections.abc import Sequence

import numpy as np

SOURCE = "source"
TARGET = "target"
INDEX = "index"
SOURCE_TEXT = "source_text"
REFERENCE_TEXT = "reference_text"


def _varint(value: int) -> bytes:
    """Returns the protobuf base-128 varint of a non-negative int."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(tag: bytes, payload: bytes) -> bytes:
    """Returns a length-delimited protobuf field: tag, length, payload."""
    return tag + _varint(len(payload)) + payload


class ExampleEncoder:
    """Serialises pairs as `tf.train.Example` bytes without TensorFlow.

    Args:
        vocab_size: ids are below this (their varints are precomputed).

    Example:
        encoder = ExampleEncoder(8000)
        record = encoder.encode([5, 9], [7], index=0)
        tf.io.parse_single_example(record, features)  # == the same tf.train.Example
    """

    def __init__(self, vocab_size: int) -> None:
        self._id_varints = [_varint(i) for i in range(vocab_size)]

    def _int64_feature(self, values: Sequence[int] | np.ndarray, table: bool) -> bytes:
        if table:
            packed = b"".join(self._id_varints[int(v)] for v in values)
        else:
            packed = b"".join(_varint(int(v)) for v in values)
        # Feature.int64_list (field 3) -> Int64List.value (field 1, packed).
        return _field(b"\x1a", _field(b"\x0a", packed))

    @staticmethod
    def _bytes_feature(value: bytes) -> bytes:
        # Feature.bytes_list (field 1) -> BytesList.value (field 1).
        return _field(b"\x0a", _field(b"\x0a", value))

    def encode(
        self,
        source_ids: Sequence[int] | np.ndarray,
        target_ids: Sequence[int] | np.ndarray,
        index: int,
        texts: tuple[str, str] | None = None,
    ) -> bytes:
        """Returns one serialised `tf.train.Example` (see the module docstring).

        Args:
            source_ids: source ids without `</s>`.
            target_ids: target ids without `</s>`.
            index: the pair's line in its split.
            texts: (source text, reference text), for evaluation splits.
        """
        features = {
            SOURCE: self._int64_feature(source_ids, table=True),
            TARGET: self._int64_feature(target_ids, table=True),
            INDEX: self._int64_feature([index], table=False),
        }
        if texts is not None:
            features[SOURCE_TEXT] = self._bytes_feature(texts[0].encode("utf-8"))
            features[REFERENCE_TEXT] = self._bytes_feature(texts[1].encode("utf-8"))
        # Example.features (field 1) -> Features.feature (field 1, map entries: key 1,
        # value 2).
        entries = b"".join(
            _field(b"\x0a", _field(b"\x0a", key.encode()) + _field(b"\x12", value))
            for key, value in features.items()
        )
        return _field(b"\x0a", entries)


def feature_spec(evaluation: bool) -> dict:
    """Returns the `tf.io.parse_example` features of a record (TensorFlow imported here)."""
    import tensorflow as tf

    spec = {
        SOURCE: tf.io.RaggedFeature(tf.int64, row_splits_dtype=tf.int64),
        TARGET: tf.io.RaggedFeature(tf.int64, row_splits_dtype=tf.int64),
        INDEX: tf.io.FixedLenFeature([], tf.int64),
    }
    if evaluation:
        spec[SOURCE_TEXT] = tf.io.FixedLenFeature([], tf.string)
        spec[REFERENCE_TEXT] = tf.io.FixedLenFeature([], tf.string)
    return spec
