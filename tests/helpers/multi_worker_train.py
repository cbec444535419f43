"""Subprocess: one worker of a MultiWorkerMirroredStrategy run on 127.0.0.1.

Usage: python -m tests.helpers.multi_worker_train MODEL_DIR WEIGHTS.npz (TF_CONFIG set).
Each worker reads different synthetic batches; the all-reduced updates must leave every
worker with the same weights. The workers' clocks disagree, as on two machines: worker 0
alone finds the time limit reached at the second epoch end, worker 1 alone finds the
cooldown due from the first; each decision must still be taken by both.
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
    config = TrainingConfig(max_steps=6, save_every_steps=2, progress_bar=False, log_every_steps=1)
    trainer = Trainer(model_fn, config, model_dir, strategy)
    checks = []

    def time_limit_reached():  # checked before training and at each epoch end
        checks.append(None)
        return task["index"] == 0 and len(checks) == 3

    trainer.stop_condition = time_limit_reached
    trainer.cooldown_condition = lambda: task["index"] == 1
    result = trainer.train(
        lambda epoch, context: dataset(seed=100 * task["index"] + epoch, batches=2),
        steps_per_epoch=2,
    )
    np.savez(weights_path, *[np.asarray(w) for w in trainer.model.get_weights()])
    print(
        json.dumps(
            {
                "task": task["index"],
                "step": result["step"],
                "learning_rate": result["learning_rate"],
                "stop_reason": result["stop_reason"],
            }
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:3])
