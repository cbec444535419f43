"""Throughput of the training input pipeline, in target tokens per second.

    python -m benchmarks.input_pipeline [--flagfile=configs/multi30k_en_de.cfg] \
        [--benchmark_epochs=5]

Prepares the data if needed (a no-op once done), builds the training pipeline over the
prepared shards, runs one warm-up epoch, then times full epochs as a trainer consumes
them (one iterator for every epoch), counting non-padding target tokens.
Ends with one JSON line of its figures. Run it from the repository root (the flagfile's
--data_dir is relative to it); without --flagfile it uses configs/multi30k_en_de.cfg.
"""

import json
import os
import sys
import time

import numpy as np
from absl import app, flags

from convs2s_tf import vocabulary
from convs2s_tf.data.pipeline import Placement, TrainingData
from convs2s_tf.data.prepare import prepare_data
from pipelines import flags as pipeline_flags

FLAGS = pipeline_flags.FLAGS
pipeline_flags.define_all_flags()
flags.DEFINE_integer(
    "benchmark_epochs", 5, "Timed epochs (after one warm-up epoch).", lower_bound=1
)

_DEFAULT_FLAGFILE = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs", "multi30k_en_de.cfg"
)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    setup_start = time.perf_counter()
    prepared = prepare_data(pipeline_flags.prepare_config_from_flags()).data
    training_data = TrainingData(
        prepared.shard_paths("train"),
        prepared.length_index("train"),
        **pipeline_flags.training_dataset_kwargs(),
    )
    stats = training_data.stats()
    steps = training_data.steps_per_epoch(Placement())
    iterator = iter(training_data.dataset(None))
    setup_seconds = time.perf_counter() - setup_start
    print(f"setup (prepare check, lengths index): {setup_seconds:.2f} s; {stats}")

    def run_epoch(epoch: int) -> tuple[int, int, float]:
        start = time.perf_counter()
        target_tokens = 0
        for _ in range(steps):
            batch = next(iterator)
            target_tokens += int(np.count_nonzero(batch["target"].numpy() != vocabulary.PAD_ID))
        return steps, target_tokens, time.perf_counter() - start

    batches, tokens, seconds = run_epoch(0)
    print(f"warm-up epoch: {batches} batches, {tokens} target tokens, {seconds:.3f} s")
    total_tokens, total_seconds = 0, 0.0
    for epoch in range(1, FLAGS.benchmark_epochs + 1):
        batches, tokens, seconds = run_epoch(epoch)
        if tokens != stats.target_tokens:
            raise AssertionError(
                f"epoch {epoch} had {tokens} target tokens, expected {stats.target_tokens}"
            )
        total_tokens += tokens
        total_seconds += seconds
        print(f"epoch {epoch}: {batches} batches, {tokens / seconds:,.0f} target tokens/s")
    print(
        json.dumps(
            {
                "target_tokens_per_sec": round(total_tokens / total_seconds),
                "epochs": FLAGS.benchmark_epochs,
                "target_tokens_per_epoch": stats.target_tokens,
                "batches_per_epoch": stats.batches_per_epoch,
                "seconds_per_epoch": round(total_seconds / FLAGS.benchmark_epochs, 4),
                "setup_seconds": round(setup_seconds, 2),
                "max_tokens": FLAGS.max_tokens,
            }
        )
    )


if __name__ == "__main__":
    if not any(arg.startswith("--flagfile") for arg in sys.argv[1:]):
        sys.argv.insert(1, f"--flagfile={_DEFAULT_FLAGFILE}")
    app.run(main)
