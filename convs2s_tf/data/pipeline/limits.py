"""Length limits and bucket layout of one input pipeline."""

import dataclasses
from collections.abc import Sequence

from convs2s_tf import vocabulary
from convs2s_tf.data.batching import bucket_batch_sizes, default_bucket_lengths, fit_bucket_lengths

DEFAULT_MAX_POSITIONS = 1024


def max_sequence_length(max_positions: int) -> int:
    """Returns the longest sequence (with `</s>`) a model with `max_positions` positions takes.

    Positions start after the padding id (as in the authors' implementation), so
    `max_positions - PAD_ID - 1` (1022 for 1024) tokens fit.
    """
    length = max_positions - vocabulary.PAD_ID - 1
    if length < 1:
        raise ValueError(f"max_positions={max_positions} leaves no room for a sequence.")
    return length


@dataclasses.dataclass(frozen=True)
class PipelineLimits:
    """Length limits and bucket layout shared by the steps of one pipeline.

    Attributes:
        max_source_length: longest source sequence (with `</s>`) the model takes.
        max_target_length: the same for the target.
        max_tokens: token budget per batch, padding included.
        bucket_lengths: padded lengths of the buckets, increasing.
        batch_sizes: sentences per full batch of each bucket (0: no batch fits the budget).
    """

    max_source_length: int
    max_target_length: int
    max_tokens: int
    bucket_lengths: tuple[int, ...]
    batch_sizes: tuple[int, ...]

    @classmethod
    def create(
        cls,
        max_source_positions: int,
        max_target_positions: int,
        max_tokens: int,
        max_sentences: int | None,
        bucket_lengths: Sequence[int] | None,
    ) -> "PipelineLimits":
        """Returns the limits of a model's positions and the bucket layout of a budget.

        Raises:
            ValueError: if the longest bucket cannot hold the longest allowed sequence.
        """
        max_source_length = max_sequence_length(max_source_positions)
        max_target_length = max_sequence_length(max_target_positions)
        longest = max(max_source_length, max_target_length)
        if bucket_lengths is None:
            bucket_lengths = fit_bucket_lengths(default_bucket_lengths(longest), max_tokens)
        bucket_lengths = tuple(sorted(int(length) for length in bucket_lengths))
        if bucket_lengths[-1] < longest:
            raise ValueError(
                f"The longest bucket ({bucket_lengths[-1]}) must hold the longest allowed "
                f"sequence ({longest})."
            )
        batch_sizes = bucket_batch_sizes(bucket_lengths, max_tokens, max_sentences)
        return cls(max_source_length, max_target_length, max_tokens, bucket_lengths, batch_sizes)

    @property
    def side_max_lengths(self) -> dict[str, int]:
        return {"source": self.max_source_length, "target": self.max_target_length}

    def cache_key(self) -> str:
        """Returns the text of these limits that names a tokenised cache file.

        It is the dataclass' repr with the class named `_Limits`: cache file names are a
        stable format, independent of the Python class name, so existing caches are
        reused.
        """
        fields = ", ".join(
            f"{field.name}={getattr(self, field.name)!r}" for field in dataclasses.fields(self)
        )
        return f"_Limits({fields})"
