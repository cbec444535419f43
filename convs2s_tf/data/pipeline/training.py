"""The training pipeline: prepared shards streamed as one dataset for the whole run.

Every epoch holds every pair that fits the positions exactly once across all workers
and replicas: worker `w` of `W` reads the shards `w, w + W, ...` (whole files), and its
replicas take its batches in turn. All workers run the same number of steps an epoch
(they meet in every step's all-reduce), so a worker whose shards make fewer batches
fills its epoch with empty batches: one `</s>` source and a `<pad>` target, which count
no tokens and add nothing to the gradient. Nothing is counted or cached at start: the
batches of each bucket come from the lengths index.

One iterator serves the whole run: epochs follow each other inside one dataset
(`Dataset.range(...).flat_map`), each shuffled by seeds computed in-graph from
(seed, epoch), so no iterator is deleted at an epoch end and a resumed run skips exactly
the batches it trained; without tf.data's autotuning thread, the one deletion at the end
of a run does not wait either (docs/input-pipeline-notes.md).

The shards are checked against their lengths index when the data is opened (sizes, and
checksums up to a size, see `shard_check`): a corrupt or mismatched shard stops the run
at its start with one line naming it, not with a `DataLossError` at the same point of
every epoch, nor with epochs padded or cut to counts the shards do not hold.
"""

import dataclasses
from collections.abc import Sequence

import tensorflow as tf

# tf.data's functions are TensorFlow ops already: traced without AutoGraph's conversion
# (docs/input-pipeline-notes.md).
from tensorflow.autograph.experimental import do_not_convert

from convs2s_tf import vocabulary
from convs2s_tf.data import records
from convs2s_tf.data.length_index import LengthIndex
from convs2s_tf.data.pipeline.block_batches import PAIR_FIELDS, batch_blocks
from convs2s_tf.data.pipeline.length_stats import LengthStats, index_length_stats
from convs2s_tf.data.pipeline.limits import DEFAULT_MAX_POSITIONS, PipelineLimits
from convs2s_tf.data.pipeline.record_pairs import parse_block, record_stream
from convs2s_tf.data.shard_check import DEFAULT_CHECKSUM_LIMIT_BYTES, check_shards

# The default shuffle block: the worker's pairs, up to this many (the shards are
# shuffled globally when prepared, so a block only has to mix a few shards again).
DEFAULT_SHUFFLE_BUFFER_SIZE = 100_000
# Batches prepared ahead of the training step.
_PREFETCH_BATCHES = 4
# Threads of the stream's own thread pool.
_INPUT_THREADS = 1
# Far more epochs than any run: the dataset ends only when the run stops reading it.
_MAX_EPOCHS = 1_000_000


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where an input pipeline sits: its worker and the replicas that share its batches.

    Attributes:
        num_workers: input pipelines (workers) in the run.
        worker: this pipeline's worker index.
        replicas_per_worker: replicas fed by each worker's pipeline.
    """

    num_workers: int = 1
    worker: int = 0
    replicas_per_worker: int = 1

    @classmethod
    def of(cls, input_context: tf.distribute.InputContext | None) -> "Placement":
        """Returns the placement of `input_context` (None: one worker, one replica)."""
        if input_context is None:
            return cls()
        return cls(
            num_workers=input_context.num_input_pipelines,
            worker=input_context.input_pipeline_id,
            replicas_per_worker=input_context.num_replicas_in_sync
            // input_context.num_input_pipelines,
        )


class TrainingData:
    """The training split's shards, batched under a token budget, for a whole run.

    Args:
        shard_paths: the split's TFRecord shards (`PreparedData.shard_paths("train")`).
        index: their lengths index (`PreparedData.length_index("train")`).
        max_tokens: token budget per batch (per replica), padding included.
        max_sentences: at most this many sentences per batch (None or 0: no cap).
        max_source_positions: the model's source positions; longer pairs are dropped.
        max_target_positions: the same for the target.
        seed: seed of every epoch's order.
        shuffle_buffer_size: pairs permuted together, in blocks of this many (None: the
            worker's pairs, up to 100,000: a whole-epoch shuffle on small corpora).
        bucket_lengths: padded lengths of the buckets (default: `default_bucket_lengths`).
        checksum_limit_bytes: compare the shards' checksums with the index's at start if
            they total at most this many bytes (None: always); sizes are always compared.

    Raises:
        CorruptShardError: a shard is missing or not the one the index describes.

    Example:
        data = TrainingData(prepared.shard_paths("train"), prepared.length_index("train"))
        steps = data.steps_per_epoch(Placement())
        batches = data.dataset(None, first_epoch=1)
    """

    def __init__(
        self,
        shard_paths: Sequence[str],
        index: LengthIndex,
        *,
        max_tokens: int = 4000,
        max_sentences: int | None = None,
        max_source_positions: int = DEFAULT_MAX_POSITIONS,
        max_target_positions: int = DEFAULT_MAX_POSITIONS,
        seed: int = 1,
        shuffle_buffer_size: int | None = None,
        bucket_lengths: Sequence[int] | None = None,
        checksum_limit_bytes: int | None = DEFAULT_CHECKSUM_LIMIT_BYTES,
    ) -> None:
        check_shards(shard_paths, index, checksum_limit_bytes)
        self.shard_paths = tuple(shard_paths)
        self.index = index
        self.limits = PipelineLimits.create(
            max_source_positions, max_target_positions, max_tokens, max_sentences, bucket_lengths
        )
        self.seed = seed
        self.shuffle_buffer_size = shuffle_buffer_size

    def worker_shards(self, placement: Placement) -> list[int]:
        """Returns the shards `placement`'s worker reads (whole files, disjoint).

        Raises:
            ValueError: if there are fewer shards than workers.
        """
        if self.index.num_shards < placement.num_workers:
            raise ValueError(
                f"{placement.num_workers} workers need at least as many training shards; "
                f"the data has {self.index.num_shards} (prepare it with "
                f"`num_shards={placement.num_workers}` or more)."
            )
        return list(range(placement.worker, self.index.num_shards, placement.num_workers))

    def stats(self, placement: Placement | None = None) -> LengthStats:
        """Returns what the limits do to the whole split, or to `placement`'s worker."""
        if placement is None:
            shards = list(range(self.index.num_shards))
        else:
            shards = self.worker_shards(placement)
        return index_length_stats(self.index, shards, self.limits, evaluation=False)

    def steps_per_epoch(self, placement: Placement) -> int:
        """Returns the steps of one epoch: those of the worker with the most batches."""
        most = max(
            self.stats(dataclasses.replace(placement, worker=worker)).batches_per_epoch
            for worker in range(placement.num_workers)
        )
        return -(-most // placement.replicas_per_worker)

    def dataset(
        self,
        input_context: tf.distribute.InputContext | None,
        first_epoch: int = 1,
        skip: int = 0,
    ) -> tf.data.Dataset:
        """Returns this worker's batches from epoch `first_epoch` on, past its first `skip`.

        Each epoch is `steps_per_epoch * replicas_per_worker` batches long (real ones,
        then empty ones); its order is a function of (seed, epoch) alone.
        """
        placement = Placement.of(input_context)
        shards = self.worker_shards(placement)
        files = [self.shard_paths[i] for i in shards]
        epoch_length = self.steps_per_epoch(placement) * placement.replicas_per_worker
        worker_pairs = int(self.index.pairs_per_shard()[shards].sum())
        buffer_size = self.shuffle_buffer_size or max(
            1, min(worker_pairs, DEFAULT_SHUFFLE_BUFFER_SIZE)
        )
        num_blocks = -(-worker_pairs // buffer_size)

        def epoch_batches(epoch: tf.Tensor) -> tf.data.Dataset:
            batches = self._epoch_batches(files, epoch, buffer_size, num_blocks)
            batches = batches.concatenate(_empty_batches(batches.element_spec))
            batches = batches.take(epoch_length)
            return batches.skip(tf.where(epoch == first_epoch, tf.constant(skip, tf.int64), 0))

        epochs = tf.data.Dataset.range(first_epoch, first_epoch + _MAX_EPOCHS)
        batches = epochs.flat_map(do_not_convert(epoch_batches)).prefetch(_PREFETCH_BATCHES)
        # No autotuning model thread: deleting an iterator joins that thread, which can
        # sleep out up to 60 s of its period first (docs/input-pipeline-notes.md); the
        # prefetch buffer is fixed. The stream runs on its own thread, its ops
        # single-threaded: sharing the step's thread pools cost the step 3-4% on 2 cores
        # (docs/input-pipeline-notes.md), and batching whole blocks leaves one thread
        # little to do.
        options = tf.data.Options()
        options.autotune.enabled = False
        options.threading.private_threadpool_size = _INPUT_THREADS
        options.threading.max_intra_op_parallelism = 1
        return batches.with_options(options)

    def _epoch_batches(
        self, files: list[str], epoch: tf.Tensor, buffer_size: int, num_blocks: int
    ) -> tf.data.Dataset:
        """Returns one epoch of `files`' batches, in an order fixed by (seed, epoch).

        The shards' order and the records within each block of `buffer_size` are
        permuted by stateless ops seeded in-graph with (seed, epoch); each block is then
        parsed and cut into batches whole (`batch_blocks`), not pair by pair.
        """
        seed = tf.constant(self.seed, tf.int64)
        shard_order = tf.random.experimental.stateless_shuffle(
            tf.constant(files), seed=tf.stack([seed, epoch])
        )
        epoch_seed = seed * 1_000_003 + epoch

        def parse_permuted(
            block_index: tf.Tensor, block: tf.Tensor
        ) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
            block = tf.random.experimental.stateless_shuffle(
                block, seed=tf.stack([epoch_seed, block_index])
            )
            pairs = parse_block(block, self.limits, evaluation=False)
            return block_index, {key: pairs[key] for key in PAIR_FIELDS}

        serialized = record_stream(tf.data.Dataset.from_tensor_slices(shard_order))
        # The next block is read and parsed while the batches of this one are trained.
        blocks = (
            serialized.batch(buffer_size)
            .enumerate()
            .map(do_not_convert(parse_permuted))
            .prefetch(1)
        )
        # Another seed than the blocks' permutations for the order of their batches.
        return batch_blocks(blocks, self.limits, num_blocks, seed=epoch_seed + 7_919)


def _empty_batches(element_spec: dict[str, tf.TensorSpec]) -> tf.data.Dataset:
    """Returns endless batches that train nothing: one sentence, `</s>` as its source
    (an all-`<pad>` source would leave attention nothing to attend to) and `<pad>` as
    its target, so they count no tokens and add nothing to the loss or gradient."""
    batch = {}
    for key, spec in element_spec.items():
        if key == records.SOURCE:
            batch[key] = tf.fill([1, 1], tf.constant(vocabulary.EOS_ID, spec.dtype))
        elif key == records.INDEX:
            batch[key] = tf.constant([-1], spec.dtype)
        else:
            batch[key] = tf.fill([1, 1], tf.constant(vocabulary.PAD_ID, spec.dtype))
    return tf.data.Dataset.from_tensors(batch).repeat()
