"""Subprocess: one update under a 2-CPU MirroredStrategy vs. on a single device.

    python -m tests.helpers.mirrored_update OPTIMIZER[:SPLIT,...]...

Prints one JSON line with, for each optimiser named (nag, adam), the max abs weight
difference for each split of the global batch across the two replicas named (default
both: `uneven`, and `empty_replica`, one replica left empty) and how far the
single-device update moved the weights.
"""

import json
import sys
import tempfile

import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()]
)

import numpy as np  # noqa: E402

from convs2s_tf.training import Trainer, TrainingConfig  # noqa: E402
from tests.helpers.synthetic import KEYS, make_batch, model_fn, split_batch  # noqa: E402


def one_update(strategy, per_replica_batches, initial_weights, optimizer):
    config = TrainingConfig(progress_bar=False, label_smoothing=0.1, optimizer=optimizer)
    trainer = Trainer(model_fn, config, tempfile.mkdtemp(), strategy)
    trainer.model.set_weights(initial_weights)
    # The production path: a distributed dataset whose elements go to the replicas in
    # turn, and the step traced once with its element spec (None dimensions).
    items = list(per_replica_batches) * 2
    dataset = tf.data.Dataset.from_generator(
        lambda: iter(items),
        output_signature={key: tf.TensorSpec([None, None], tf.int32) for key in KEYS},
    )
    distributed = strategy.distribute_datasets_from_function(lambda context: dataset)
    trainer._build_steps(distributed.element_spec)
    iterator = iter(distributed)
    # Two updates, so momentum is exercised as well.
    for _ in range(2):
        result = trainer._train_step(next(iterator))
    assert bool(result["applied"])
    return [w.numpy() if hasattr(w, "numpy") else np.asarray(w) for w in trainer.model.weights]


SPLITS = {"uneven": (4, 2), "empty_replica": (6, 0)}


def compare(optimizer, splits, global_batch, initial):
    """The single-device update and the mirrored ones' differences from it."""
    single = one_update(
        tf.distribute.OneDeviceStrategy("/cpu:0"), [global_batch], initial, optimizer
    )
    mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    assert mirrored.num_replicas_in_sync == 2
    differences = {}
    for name in splits:
        parts = split_batch(global_batch, SPLITS[name])
        weights = one_update(mirrored, parts, initial, optimizer)
        differences[name] = max(
            float(np.max(np.abs(a.astype(np.float64) - b)))
            for a, b in zip(single, weights)
            if a.dtype.kind == "f"
        )
    moved = max(
        float(np.max(np.abs(a - b))) for a, b in zip(single, initial) if a.dtype.kind == "f"
    )
    return {"differences": differences, "moved": moved}


def main():
    rng = np.random.default_rng(0)
    global_batch = make_batch(rng, 6)
    reference_trainer = Trainer(
        model_fn,
        TrainingConfig(progress_bar=False),
        tempfile.mkdtemp(),
        tf.distribute.OneDeviceStrategy("/cpu:0"),
    )
    initial = reference_trainer.model.get_weights()
    results = {}
    for argument in sys.argv[1:]:
        name, _, splits = argument.partition(":")
        results[name] = compare(
            name, splits.split(",") if splits else SPLITS, global_batch, initial
        )
    print(json.dumps(results))


if __name__ == "__main__":
    sys.exit(main())
