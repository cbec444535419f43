"""tf.data input pipelines: prepared text -> token-budget batches for training and evaluation.

Both pipelines yield dicts of int32 tensors padded with `<pad>` (id 1):

- "source": [B, S], the source pieces followed by `</s>`;
- "target": [B, T], the target pieces y1..yn followed by `</s>`;
- "target_input": [B, T], the decoder input `</s>`, y1..yn, i.e. "target" shifted right
  by one with `</s>` in front (and `<pad>` wherever "target" is `<pad>`).

The evaluation pipeline adds "source_text" and "reference_text" (tf.string [B], the
prepared text, for BLEU) and "index" (int64 [B], the line number in the split, 0-based).

Steps: read the two text files line by line (sharded per worker) -> tokenise in-graph in
blocks of lines (one SentencePiece tokenizer, `</s>` added with tf.concat), assigning
each pair its length bucket -> cache (memory or disk, so later epochs skip all of this)
-> [training: seeded shuffle] -> batch per bucket under the token budget, dropping
(training) the pairs longer than the model's positions -> prefetch. Evaluation pairs
that are too long are truncated instead, so every reference is kept.

Building a pipeline runs one pass over the tokenised data to count what the length limit
removes and how many batches an epoch has; that pass fills the cache, so the first epoch
does not tokenise again.

Modules:

- `limits`: the model's length limits and the bucket layout (`max_sequence_length`).
- `tokenized_pairs`: reading, sharding, tokenising and bucketing pairs, and their cache.
- `length_stats`: the counting pass (`LengthStats`).
- `batches`: batching per bucket and the pipelines' result (`BatchedDataset`).
- `training`: `make_training_dataset`, `TrainingDatasetFn`.
- `evaluation`: `make_eval_dataset`.
"""

from convs2s_tf.data.pipeline.batches import BatchedDataset
from convs2s_tf.data.pipeline.evaluation import make_eval_dataset
from convs2s_tf.data.pipeline.length_stats import LengthStats
from convs2s_tf.data.pipeline.limits import DEFAULT_MAX_POSITIONS, max_sequence_length
from convs2s_tf.data.pipeline.training import TrainingDatasetFn, make_training_dataset

__all__ = [
    "DEFAULT_MAX_POSITIONS",
    "BatchedDataset",
    "LengthStats",
    "TrainingDatasetFn",
    "make_eval_dataset",
    "make_training_dataset",
    "max_sequence_length",
]
