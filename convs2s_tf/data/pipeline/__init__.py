"""tf.data input pipelines: prepared data -> token-budget batches for training and evaluation.

Both pipelines yield dicts of int32 tensors padded with `<pad>` (id 1):

- "source": [B, S], the source pieces followed by `</s>`;
- "target": [B, T], the target pieces y1..yn followed by `</s>`;
- "target_input": [B, T], the decoder input `</s>`, y1..yn, i.e. "target" shifted right
  by one with `</s>` in front (and `<pad>` wherever "target" is `<pad>`);
- "index": int64 [B], each pair's line in its split (-1 in a training epoch's empty
  batches, see `training`).

Evaluation batches add "source_text" and "reference_text" (tf.string [B], for BLEU).

Training reads the prepared TFRecord shards (`TrainingData`): shards by file per worker
-> seeded shuffle of blocks of records -> parse each block, append `</s>`, assign
buckets -> cut the block into batches per bucket under the token budget, dropping the
pairs longer than the model's positions -> epochs one after another in one dataset.
Batch counts come from the lengths index.
Evaluation reads a split's shards (`make_shard_eval_dataset`) or tokenises text files
in-graph (`make_eval_dataset`, cached after its counting pass); pairs too long are
truncated instead of dropped, so every reference is kept.

Modules:

- `limits`: the model's length limits and the bucket layout (`max_sequence_length`).
- `record_pairs`: pairs read from prepared shards.
- `tokenized_pairs`: pairs read from text and tokenised in-graph, and their cache.
- `length_stats`: what the limits do to a split (`LengthStats`), from the lengths
  index or from a counting pass.
- `batches`: batching pair by pair per bucket and the pipelines' result (`BatchedDataset`).
- `block_batches`: batching whole blocks of pairs per bucket (the training stream).
- `training`: `TrainingData`, `Placement`.
- `evaluation`: `make_shard_eval_dataset`, `make_eval_dataset`.
"""

from convs2s_tf.data.pipeline.batches import BatchedDataset
from convs2s_tf.data.pipeline.evaluation import make_eval_dataset, make_shard_eval_dataset
from convs2s_tf.data.pipeline.length_stats import LengthStats, index_length_stats
from convs2s_tf.data.pipeline.limits import DEFAULT_MAX_POSITIONS, max_sequence_length
from convs2s_tf.data.pipeline.training import Placement, TrainingData

__all__ = [
    "DEFAULT_MAX_POSITIONS",
    "BatchedDataset",
    "LengthStats",
    "Placement",
    "TrainingData",
    "index_length_stats",
    "make_eval_dataset",
    "make_shard_eval_dataset",
    "max_sequence_length",
]
