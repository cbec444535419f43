"""Subprocess: one worker of a MultiWorkerMirroredStrategy run on 127.0.0.1.

Usage: python -m tests.helpers.multi_worker_train MODEL_DIR WEIGHTS.npz (TF_CONFIG set).
Each worker reads different synthetic batches; the all-reduced updates must leave every
worker with the same weights. The workers disagree, as two machines would: worker 1's
validation gives another loss every epoch, and its clock finds the time limit reached
and the cooldown due at once; the chief's finds the cooldown due from its second epoch
end and the time limit at its third. Every decision must be the chief's, on both.
"""

import json
import os
import sys

import numpy as np

from convs2s_tf.training import Trainer, TrainingConfig, create_strategy
from tests.helpers.synthetic import EpochBatches, dataset, model_fn


def main(model_dir, weights_path):
    task = json.loads(os.environ["TF_CONFIG"])["task"]
    strategy = create_strategy("multi_worker")
    config = TrainingConfig(
        max_epochs=10, save_every_steps=2, progress_bar=False, log_every_steps=1, valid_beam_size=0
    )
    trainer = Trainer(model_fn, config, model_dir, strategy)
    checks = []

    def time_limit_reached():  # checked before training and at each epoch end
        checks.append("time")
        return task["index"] == 1 or len([c for c in checks if c == "time"]) == 4

    def cooldown_due():
        checks.append("cooldown")
        return task["index"] == 1 or len([c for c in checks if c == "time"]) >= 3

    trainer.stop_condition = time_limit_reached
    trainer.cooldown_condition = cooldown_due
    if task["index"] == 1:
        validate = trainer.validate

        def other_validation(valid_dataset):
            results = validate(valid_dataset)
            return {**results, "valid_loss": 100.0 + len(decisions)}

        trainer.validate = other_validation
    decisions = []
    end_epoch = trainer._end_epoch

    def recorded_end_epoch(*args, **kwargs):
        results = end_epoch(*args, **kwargs)
        decisions.append(
            {
                "learning_rate": round(float(trainer.state.learning_rate.numpy()), 6),
                "best_valid_loss": round(float(trainer.state.best_valid_loss.numpy()), 4),
                "valid_loss": round(results["valid_loss"], 4),
            }
        )
        return results

    trainer._end_epoch = recorded_end_epoch
    result = trainer.train(
        EpochBatches(
            lambda epoch, context: dataset(seed=100 * task["index"] + epoch, batches=2),
            steps_per_epoch=2,
        ),
        valid_dataset=dataset(seed=99, batches=1),
    )
    np.savez(weights_path, *[np.asarray(w) for w in trainer.model.get_weights()])
    print(
        json.dumps(
            {
                "task": task["index"],
                "step": result["step"],
                "stop_reason": result["stop_reason"],
                "decisions": decisions,
                "conditions_checked": len(checks),
            }
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:3])
