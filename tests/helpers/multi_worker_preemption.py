"""Subprocess: one worker of a 2-worker run whose worker 1 gets SIGTERM while the chief
validates (MultiWorkerMirroredStrategy on 127.0.0.1, TF_CONFIG set).

Usage: python -m tests.helpers.multi_worker_preemption MODEL_DIR

Epochs of 2 steps on synthetic batches, a validation set of `VALID_BATCHES` batches
(only the chief scores them). Worker 1 sends itself SIGTERM as it starts waiting for the
chief's first validation. Prints one JSON line: the stop reason, the step, and the
validation batches this worker scored.
"""

import json
import os
import signal
import sys

from convs2s_tf.training import Trainer, TrainingConfig, create_strategy
from tests.helpers.synthetic import EpochBatches, dataset, model_fn

VALID_BATCHES = 20


def main(model_dir):
    task = json.loads(os.environ["TF_CONFIG"])["task"]
    strategy = create_strategy("multi_worker")
    config = TrainingConfig(max_epochs=3, save_every_steps=0, progress_bar=False, valid_beam_size=0)
    trainer = Trainer(model_fn, config, model_dir, strategy)
    scored = []
    loss_sums = trainer.validator._loss_sums

    def counted(*batch):
        scored.append(1)
        return loss_sums(*batch)

    trainer.validator._loss_sums = counted
    wait = trainer._wait_for_chief_validation

    def preempted_wait():
        os.kill(os.getpid(), signal.SIGTERM)
        wait()

    if task["index"] == 1:
        trainer._wait_for_chief_validation = preempted_wait
    result = trainer.train(
        EpochBatches(
            lambda epoch, context: dataset(seed=100 * task["index"] + epoch, batches=2),
            steps_per_epoch=2,
        ),
        valid_dataset=dataset(seed=99, batches=VALID_BATCHES),
    )
    print(
        json.dumps(
            {
                "task": task["index"],
                "stop_reason": result["stop_reason"],
                "step": result["step"],
                "scored": len(scored),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1])
