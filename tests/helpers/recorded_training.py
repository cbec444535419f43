"""Subprocess: `pipelines.train` that records which pairs every step trained on.

Usage: python -m tests.helpers.recorded_training RECORD.jsonl [pipelines.train flags]

Appends JSON lines to RECORD.jsonl (flushed, so a killed run leaves every step it
finished): first this process' pid (`{"pid": ...}`: a test forks workers through a
client that cannot pass SIGKILL on); then one per step: the step counter after it, the
epoch and the "index" of every real pair in the step's batches on this worker (empty
batches have -1 and are left out); and one per checkpoint save this process wrote.
"""

import json
import os
import sys

from convs2s_tf.training import checkpointing, trainer
from pipelines import cli
from pipelines import train as train_pipeline


def main():
    record_path = sys.argv.pop(1)
    record = open(record_path, "a", buffering=1)
    if record.tell():
        # A process killed mid-line left no newline: start on a line of our own.
        record.write("\n")
    record.write(json.dumps({"pid": os.getpid()}) + "\n")
    train = trainer.Trainer.train

    def record_batch(self, batch):
        indices = [
            int(i)
            for local in self.strategy.experimental_local_results(batch["index"])
            for i in local.numpy()
            if i >= 0
        ]
        line = {
            "step": int(self.state.step.numpy()),
            "epoch": int(self.state.epoch.numpy()) + 1,
            "indices": indices,
            "learning_rate": float(self.state.learning_rate.numpy()),
        }
        record.write(json.dumps(line) + "\n")

    def recorded_train(self, *args, **kwargs):
        self.after_batch = lambda batch: record_batch(self, batch)
        return train(self, *args, **kwargs)

    save = checkpointing.TrainingCheckpoints.save

    def recorded_save(self, *args, **kwargs):
        path = save(self, *args, **kwargs)
        record.write(json.dumps({"saved": path}) + "\n")
        return path

    trainer.Trainer.train = recorded_train
    checkpointing.TrainingCheckpoints.save = recorded_save
    cli.run(train_pipeline.main)


if __name__ == "__main__":
    main()
