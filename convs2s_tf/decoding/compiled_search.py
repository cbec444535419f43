"""Small batches searched by one XLA computation per fixed bucket, large ones in graph mode.

At batch 1 a search step is a few hundred small operations; in graph mode the executor's
cost per operation is most of the step. `BucketedSearch` runs the whole search loop of a
small batch as one XLA computation instead: the batch is padded to the next of a few
fixed sizes (`SearchBuckets.batch_sizes`) and the encoder output to a fixed source width
(`SearchBuckets.source_length`), so each bucket compiles exactly once, and it compiles
when the model loads if every bucket is warmed up (`warmup_batch_sizes`). The encoder
runs in graph mode on the batch as it is, before the padding; padded rows start finished
(they never prolong the loop) and padded source positions are masked, so a sentence's
result does not depend on its bucket. Larger batches, longer sources and searches that
keep their attention take `beam_search`'s graph path, whose oneDNN kernels and leaving
of done sentences suit them better.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import tensorflow as tf

from convs2s_tf.decoding.beam_search import (
    XLA_SOURCE_MULTIPLE,
    beam_search,
    checked_max_lengths,
    n_best_of,
    round_up,
    search_loop,
)
from convs2s_tf.decoding.beam_state import (
    BeamState,
    FinishedHypotheses,
    SearchOutput,
    initial_beam_state,
)
from convs2s_tf.decoding.growing_state import outgrows
from convs2s_tf.decoding.inference_model import make_inference_model
from convs2s_tf.decoding.search_config import SearchConfig
from convs2s_tf.decoding.step_constants import OutputVocabulary, StepConstants, output_vocabulary
from convs2s_tf.layers.folded_kernels import KernelValue
from convs2s_tf.layers.int8_kernel import graph_mode_kernels

if TYPE_CHECKING:
    from convs2s_tf.decoding.ensemble import Ensemble
    from convs2s_tf.models import ConvS2S
    from convs2s_tf.shortlist.shortlist import ShortlistTable

__all__ = [
    "INT8_LARGE_BATCH_SIZES",
    "BucketedSearch",
    "SearchBuckets",
    "compiled_buckets",
    "pad_rows_and_positions",
]


@dataclasses.dataclass(frozen=True)
class SearchBuckets:
    """The fixed shapes small batches are searched in, one XLA compilation each.

    Attributes:
        batch_sizes: Increasing batch sizes; a batch of `n` sentences is padded to the
            first one `>= n`. Batches above the last take the graph path.
        source_length: Source tokens (`</s>` included) every compiled search is padded
            to; longer sources take the graph path.
    """

    # Up to 8: compiled, a batch of 8 searches 1.13-1.14 times as fast as in graph mode,
    # one of 16 1.07 times, one of 32 0.87 times; each bucket costs a compilation at load
    # (docs/performance.md, "Translation speed").
    batch_sizes: tuple = (1, 2, 4, 8)
    source_length: int = 64

    def __post_init__(self) -> None:
        sizes = tuple(int(size) for size in self.batch_sizes)
        if not sizes or sizes[0] < 1 or list(sizes) != sorted(set(sizes)):
            raise ValueError(f"batch_sizes must increase from >= 1, got {self.batch_sizes}.")
        if self.source_length < 1:
            raise ValueError(f"source_length must be >= 1, got {self.source_length}.")
        object.__setattr__(self, "batch_sizes", sizes)

    @property
    def max_batch_size(self) -> int:
        """The largest batch searched by a compiled bucket."""
        return self.batch_sizes[-1]


# The larger buckets of a search with int8 weights: in graph mode its products gain
# nothing from the 8-bit weights and pay for rounding their rows, while compiled they
# run on the CPU's 8-bit units (docs/performance.md, "int8 weights").
INT8_LARGE_BATCH_SIZES = (8, 16, 32, 64, 128)


def compiled_buckets(
    buckets: SearchBuckets | None, search_config: SearchConfig
) -> SearchBuckets | None:
    """The buckets a search in `search_config`'s dtype compiles: `buckets` in float32
    (with int8 weights, followed by `INT8_LARGE_BATCH_SIZES`), None (graph mode only)
    in bfloat16 or when `buckets` is None.

    XLA on CPU computes bfloat16 products without the CPU's bfloat16 units and rounds
    them differently from oneDNN's kernels, so compiled buckets would make a bfloat16
    search slower and change its translations at small batches.
    """
    if buckets is None or search_config.dtype != "float32":
        return None
    if not search_config.int8_weights:
        return buckets
    larger = tuple(size for size in INT8_LARGE_BATCH_SIZES if size > buckets.max_batch_size)
    return dataclasses.replace(buckets, batch_sizes=buckets.batch_sizes + larger)


def pad_rows_and_positions(
    tensor: tf.Tensor, rows: int | tf.Tensor, positions: int | tf.Tensor, axis: int = 1
) -> tf.Tensor:
    """`tensor` (`[batch, ...]`) zero-padded to `rows` rows and to `positions` on its
    source `axis`."""
    shape = tf.shape(tensor)
    paddings = [[0, rows - shape[0]]] + [[0, 0]] * (tensor.shape.rank - 1)
    paddings[axis] = [0, positions - shape[axis]]
    dims = [rows] + tensor.shape[1:].as_list()
    dims[axis] = positions
    return tf.ensure_shape(tf.pad(tensor, paddings), dims)


class BucketedSearch:
    """A beam search whose small batches run as one XLA computation per bucket.

    Built once per model and search (e.g. by a `TranslationModule`); `__call__` is used
    inside a `tf.function`. Results equal `beam_search`'s.

    Args:
        model: A built `ConvS2S` (or `Ensemble`).
        search_config: The `SearchConfig` (its `xla` applies to the graph path).
        buckets: The `SearchBuckets`.
        kernels: The model's folded kernels (`fold_kernels`), kept by the caller, or
            `Int8Kernel`s of them: the compiled searches multiply int8 by int8, the
            graph path the same integers in float32 (`graph_mode_kernels`). Each
            search makes its `InferenceModel` of them where it is traced.
        shortlist: A `ShortlistTable` every batch is decoded against, or None. A bucket
            pads its set to the most ids its sources could bring (`capacity`), so the
            compiled shapes stay fixed.

    Attributes:
        compiled_loop: The XLA-compiled search of one bucket, `(encoder_output,
            max_lengths, active, vocabulary) -> BeamState`, its inputs padded to the
            bucket (`pad_rows_and_positions`).
        state_width: Positions a growing decoder state (`growing_state`) holds in the
            compiled loop: the bucket's source width. A search that needs more steps
            goes on in graph mode from where the compiled loop stopped.
    """

    def __init__(
        self,
        model: ConvS2S | Ensemble,
        search_config: SearchConfig | None = None,
        buckets: SearchBuckets | None = None,
        kernels: Sequence[KernelValue] | None = None,
        shortlist: ShortlistTable | None = None,
    ) -> None:
        self.model = model
        self.shortlist = shortlist
        self.search_config = search_config or SearchConfig()
        self.buckets = buckets or SearchBuckets()
        self.kernels = kernels
        config = self.search_config
        decoder = model.decoder
        # Fixed shapes: finished sentences stay in the batch.
        self.constants = StepConstants(
            beam_size=config.beam_size,
            vocab_size=decoder.vocab_size,
            min_length=config.min_length,
            length_penalty=config.length_penalty,
            unk_penalty=config.unk_penalty,
            xla=True,
        )
        # The longest output any source of the bucket width can have, and the token
        # histories' width (steps 0..max_length write columns 0..max_length).
        longest = min(
            int(config.max_len_a * self.buckets.source_length + config.max_len_b),
            decoder.max_length - 1,
        )
        self.history_width = round_up(longest + 1, XLA_SOURCE_MULTIPLE)
        # Every compiled step writes, reorders and attends over the whole of a growing
        # state (self-attention keys and values): sized for the bucket's sources rather
        # than the length limit, as few translations outgrow their source's bucket
        # (PoseNet, one sentence, beam 5: 77-86 ms at 208 columns, 61-70 at 64;
        # docs/posenet.md).
        self.state_width = min(
            self.history_width, round_up(self.buckets.source_length, XLA_SOURCE_MULTIPLE)
        )
        self.compiled_loop = tf.function(self._search_loop, jit_compile=True, autograph=False)

    def __call__(self, source: tf.Tensor, nbest: int = 1) -> SearchOutput:
        """The `SearchOutput` of `source` (`[batch, source]` ids ending in `</s>`)."""
        shape = tf.shape(source)
        fits = tf.logical_and(
            shape[0] <= self.buckets.max_batch_size, shape[1] <= self.buckets.source_length
        )
        return tf.cond(
            fits, lambda: self._bucketed(source, nbest), lambda: self._graph(source, nbest)
        )

    def _graph(self, source: tf.Tensor, nbest: int) -> SearchOutput:
        return beam_search(
            make_inference_model(self.model, graph_mode_kernels(self.kernels)),
            source,
            self.search_config.replace(nbest=nbest),
            shortlist=self.shortlist,
        )

    def encode(self, source: tf.Tensor) -> tuple[Any, tf.Tensor]:
        """`(encoder_output, max_lengths)` of `source` as a bucket's search starts from
        them, before the padding: in graph mode, on the batch as it is."""
        config = self.search_config
        inference = make_inference_model(self.model, graph_mode_kernels(self.kernels))
        max_lengths = checked_max_lengths(
            inference.decoder, source, config.max_len_a, config.max_len_b, config.min_length
        )
        return inference.encode(source, training=False), max_lengths

    def _bucketed(self, source: tf.Tensor, nbest: int) -> SearchOutput:
        batch = tf.shape(source)[0]
        encoder_output, max_lengths = self.encode(source)
        source_axes = self.model.source_axes(encoder_output)

        def bucket_branch(rows: int) -> Callable[[], FinishedHypotheses]:
            def run() -> FinishedHypotheses:
                vocabulary = None
                if self.shortlist is not None:
                    inference = make_inference_model(self.model, self.kernels)
                    capacity = self.shortlist.capacity(rows, self.buckets.source_length)
                    vocabulary = output_vocabulary(
                        inference.decoder, self.shortlist, source, self.constants, capacity
                    )
                padded = tf.nest.map_structure(
                    lambda t, axis: pad_rows_and_positions(
                        t, rows, self.buckets.source_length, axis
                    ),
                    encoder_output,
                    source_axes,
                )
                lengths = tf.ensure_shape(tf.pad(max_lengths, [[0, rows - batch]]), [rows])
                active = tf.range(rows) < batch
                state = self.compiled_loop(padded, lengths, active, vocabulary)
                finished = self._go_on_in_graph_mode(state, lengths, active, vocabulary)
                return tf.nest.map_structure(lambda t: t[:batch], finished)

            return run

        sizes = tf.constant(self.buckets.batch_sizes)
        index = tf.searchsorted(sizes, tf.reshape(batch, [1]))[0]
        finished = tf.switch_case(index, [bucket_branch(rows) for rows in self.buckets.batch_sizes])
        return n_best_of(finished, nbest)

    def _search_loop(
        self,
        encoder_output: Any,
        max_lengths: tf.Tensor,
        active: tf.Tensor,
        vocabulary: OutputVocabulary | None = None,
    ) -> BeamState:
        """The search of one bucket (the XLA computation): its state when every sentence
        is done, or when a growing decoder state is full (`state_width`)."""
        constants = self.constants
        rows = max_lengths.shape[0]
        # Made inside the XLA computation: the kernels are its tensors.
        decoder = make_inference_model(self.model, self.kernels).decoder
        state = initial_beam_state(
            constants.beam_size,
            encoder_output=encoder_output,
            max_lengths=max_lengths,
            # One width: phases of growing widths (one loop each, as `phase_widths`
            # gives) run in process, but a SavedModel's XLA program of several loops
            # fails to load (tf2xla finds no body function for the second).
            cache=decoder.initial_state(rows * constants.beam_size, self.state_width),
            width=self.history_width,
            source_length=self.buckets.source_length,
        )
        # Padded rows start done: the loop never waits for them.
        state = state._replace(finished_count=tf.where(active, 0, constants.beam_size))
        max_steps = _active_max_steps(max_lengths, active)
        if outgrows(decoder, state.cache, self.state_width):
            # Step `state_width - 1` writes the last column of an unlimited leaf.
            max_steps = tf.minimum(max_steps, self.state_width)
        return search_loop(
            decoder, constants, state, max_steps, compile_step=False, vocabulary=vocabulary
        )

    def _go_on_in_graph_mode(
        self,
        state: BeamState,
        max_lengths: tf.Tensor,
        active: tf.Tensor,
        vocabulary: OutputVocabulary | None,
    ) -> FinishedHypotheses:
        """The finished hypotheses of a compiled loop's `state`, searched on in graph mode
        (its growing state a column a step) if it stopped with a full growing state."""
        decoder = make_inference_model(self.model, graph_mode_kernels(self.kernels)).decoder
        if not outgrows(decoder, state.cache, self.state_width):
            return state.finished
        # (No step when the compiled loop finished: the loop's condition is false.)
        state = search_loop(
            decoder,
            self.constants,
            state,
            _active_max_steps(max_lengths, active),
            compile_step=False,
            grow=True,
            vocabulary=vocabulary,
        )
        return state.finished

    def warmup_batch_sizes(self) -> list[int]:
        """One batch size per bucket: what warm-up requests must cover."""
        return list(self.buckets.batch_sizes)


def _active_max_steps(max_lengths: tf.Tensor, active: tf.Tensor) -> tf.Tensor:
    """The steps a bucket's search may take: its longest real sentence's limit, plus the
    step that may only end it (padded rows count for nothing)."""
    return tf.reduce_max(tf.where(active, max_lengths, 0)) + 1
