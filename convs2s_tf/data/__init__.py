"""Data side of convs2s_tf: corpora, cleaning, BPE, and the tf.data input pipelines.

Modules (one concept each):

- `sources`: where parallel text comes from (embedded Multi30k via tfds, local files,
  tfds catalog names such as `wmt14_translate/de-en`).
- `text_files`: reading `PREFIX.LANG` files (plain or gzip) with UTF-8 checks.
- `cleaning`: the paper's training-set cleaning rules, with per-rule counts.
- `bpe`: joint SentencePiece BPE training with the project's special ids.
- `statistics`: token counts and length percentiles for the summary.
- `fingerprint`: what prepared outputs were made from (re-runs are no-ops).
- `data_directory`: what a prepared data directory holds (`PreparedData`, file names).
- `prepare`: corpus -> data directory (`prepare_data`).
- `tokenizer`: in-graph SentencePiece (`Tokenizer`), usable in tf.data and SavedModels.
- `batching`: fixed length buckets under a token budget.
- `records`: the prepared record format (`tf.train.Example` per pair, no TF needed).
- `length_index`: each split's per-shard length histograms (`LengthIndex`).
- `shard_writer`: a split's text -> tokenised, shuffled TFRecord shards (worker processes).
- `preparation_lock`: one preparation among processes sharing a filesystem.
- `pipeline` (a package): `TrainingData`, `make_shard_eval_dataset`, `make_eval_dataset`,
  built from its modules (length limits, record and text readers, batches).
"""
