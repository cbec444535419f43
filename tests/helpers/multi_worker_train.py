"""Subprocess: one worker of a MultiWorkerMirroredStrategy run on 127.0.0.1.

Usage: python -m tests.helpers.multi_worker_train MODEL_DIR WEIGHTS.npz (TF_CONFIG set).
Each worker reads different synthetic batches; the all-reduced updates must leave every
worker with the same weights.
"""

import json
import os
import sys

import numpy as np

from convs2s_tf.training import Trainer, TrainingConfig, create_strategy
from tests.helpers.synthetic import dataset, model_fn


def main(model_dir, weights_path):
    task = json.loads(os.environ["TF_CONFIG"])["task"]
    strategy = create_strategy("multi_worker")
    config = TrainingConfig(max_steps=4, save_every_steps=2, progress_bar=False, log_every_steps=1)
    trainer = Trainer(model_fn, config, model_dir, strategy)
    result = trainer.train(
        lambda epoch, context: dataset(seed=100 * task["index"] + epoch, batches=3),
        steps_per_epoch=3,
    )
    np.savez(weights_path, *[np.asarray(w) for w in trainer.model.get_weights()])
    print(json.dumps({"task": task["index"], "step": result["step"]}))


if __name__ == "__main__":
    main(*sys.argv[1:3])
