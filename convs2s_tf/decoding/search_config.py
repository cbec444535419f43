"""The one home of the beam-search settings and their defaults."""

from __future__ import annotations

import dataclasses
from typing import Any

COMPUTE_DTYPES = ("float32", "bfloat16")


@dataclasses.dataclass(frozen=True)
class SearchConfig:
    """How translations are searched for; the defaults are fairseq's `generate`.

    Every caller (training's validation and test score, `pipelines.translate`,
    `pipelines.evaluate`, exports and the SavedModel module) takes one of these, so a
    checkpoint scores the same wherever it is decoded.

    Attributes:
        beam_size: Beam width `K` (1: greedy search).
        nbest: Hypotheses returned per sentence (at most `beam_size`).
        max_len_a: `a` of the maximum output length `a * source_length + b` (tokens
            before `</s>`).
        max_len_b: `b` of the maximum output length.
        min_length: Minimum number of tokens before `</s>`.
        length_penalty: `alpha` in `score / length ** alpha` (1: plain normalisation).
        unk_penalty: Subtracted from the log-probability of `<unk>`.
        dtype: Compute dtype of the matrix products, "float32" or "bfloat16" (weights
            stay float32; softmax and scores float32).
        xla: XLA-compile the decoder step.
        int8_weights: Exports and translators hold the folded kernels as int8 with a
            scale per output column (`Int8Kernel`), and a search step rounds each row it
            multiplies by them to int8 (float32 compute dtype only). The compiled
            searches (`BucketedSearch`, batches of up to 128 sentences with these
            weights: `compiled_buckets`) then run those products on the CPU's 8-bit
            units; graph mode computes the same sums in float32.
        parts: A batch searched in graph mode is searched as this many searches of its
            rows side by side (`search_in_parts`; not with a shortlist, whose candidate
            set is the whole batch's). With one intra-op thread per search
            (`search_one_batch_per_core`, TF Serving's
            `--tensorflow_intra_op_parallelism=1`) each takes a core, so a lone
            request uses them all; the translations do not change.

    Example:

    >>> config = SearchConfig(beam_size=4, nbest=2)
    >>> config.validate().max_length(source_length=12)
    200
    """

    beam_size: int = 5
    nbest: int = 1
    max_len_a: float = 0.0
    max_len_b: int = 200
    min_length: int = 1
    length_penalty: float = 1.0
    unk_penalty: float = 0.0
    dtype: str = "float32"
    xla: bool = False
    int8_weights: bool = False
    # Two: the cores of the smallest machine this serves on; more cores want more parts
    # (docs/performance.md, "Several cores").
    parts: int = 2

    def validate(self, model_max_length: int | None = None) -> SearchConfig:
        """Raises ValueError naming the first setting that cannot work; returns self.

        Args:
            model_max_length: Output positions the model allows (`</s>` included), when
                known: a `min_length` beyond it could never be met.
        """
        if self.beam_size < 1:
            raise ValueError(f"`beam_size` must be >= 1, got {self.beam_size}.")
        if not 1 <= self.nbest <= self.beam_size:
            raise ValueError(
                f"`nbest={self.nbest}` must be between 1 and `beam_size={self.beam_size}`."
            )
        if self.min_length < 0:
            raise ValueError(f"`min_length` must be >= 0, got {self.min_length}.")
        if self.max_len_a < 0 or self.max_len_b < 0:
            raise ValueError("`max_len_a` and `max_len_b` must be >= 0.")
        if self.max_len_a == 0 and self.min_length > self.max_len_b:
            # fairseq refuses min_len > max_len too ("please adjust these").
            raise ValueError(
                f"`min_length={self.min_length}` exceeds the maximum output length "
                f"`max_len_b={self.max_len_b}` (with `max_len_a=0`): no translation could "
                "end; lower `min_length` or raise the maximum."
            )
        if model_max_length is not None and self.min_length > model_max_length - 1:
            raise ValueError(
                f"`min_length={self.min_length}` exceeds the model's longest output "
                f"({model_max_length - 1} tokens before </s>)."
            )
        if self.parts < 1:
            raise ValueError(f"`parts` must be >= 1, got {self.parts}.")
        if self.dtype not in COMPUTE_DTYPES:
            raise ValueError(f"dtype must be one of {COMPUTE_DTYPES}, got {self.dtype!r}.")
        if self.int8_weights and self.dtype != "float32":
            raise ValueError(
                f"int8 weights multiply float32 rows: they need dtype 'float32', got "
                f"{self.dtype!r}."
            )
        return self

    def max_length(self, source_length: int) -> int:
        """The maximum output length for a source of `source_length` tokens."""
        return int(self.max_len_a * source_length + self.max_len_b)

    def replace(self, **changes: Any) -> SearchConfig:
        """A copy with `changes` applied."""
        return dataclasses.replace(self, **changes)
