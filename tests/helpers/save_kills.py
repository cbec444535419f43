"""A tiny run's epoch-end saves, stopped at one point of `TrainingCheckpoints.save`.

As a subprocess (`python -m tests.helpers.save_kills RUN_DIR EPOCH POINT`) it ends the
epochs 1 to EPOCH and SIGKILLs itself at POINT of EPOCH's save; the tests restart in
process with `build_checkpoints` and `end_epoch`, and stop in process with `stop_at`.

A point is `<when>_<directory>`, the directory one of `epoch_ends`, `best`, `checkpoints`:

- `before`, `after`: around that directory's `CheckpointManager.save`;
- `during`: the shards written to `ckpt-N_temp/`, not yet merged;
- `merging`: inside the merge (TensorFlow's MergeBundles): the data moved to
  `ckpt-N.data-*`, half of `ckpt-N.index` written in place, `ckpt-N_temp/` still there;
- `state`: the `checkpoint` state file written to its temporary name, not yet renamed.
"""

import contextlib
import os
import signal
import sys
import uuid

import tensorflow as tf
from tensorflow.python.lib.io import file_io
from tensorflow.python.ops import gen_io_ops

from convs2s_tf.runs import RunDirectory
from convs2s_tf.training.checkpointing import TrainingCheckpoints
from convs2s_tf.training.plateau import PlateauSchedule
from convs2s_tf.training.training_state import TrainingState

# Each epoch's validation loss: the second is the run's lowest.
LOSSES = {1: 2.0, 2: 1.0, 3: 1.5}
EPOCHS = len(LOSSES)
STEPS_PER_EPOCH = 10
# The manager of each directory, as `TrainingCheckpoints` names it, in the order it saves.
MANAGERS = {"epoch_ends": "epoch_end_manager", "best": "best_manager", "checkpoints": "manager"}
POINTS = [
    f"{when}_{directory}"
    for directory in MANAGERS
    for when in ("before", "during", "merging", "state", "after")
]


class TinyModel(tf.Module):
    """A model whose one variable holds the epoch it was saved at."""

    def __init__(self):
        super().__init__(name="tiny_model")
        self.kernel = tf.Variable(tf.zeros([4]), name="kernel")


class TinyOptimizer(tf.Module):
    """What `TrainingCheckpoints` needs of an optimiser: a learning rate."""

    def __init__(self):
        super().__init__(name="tiny_optimizer")
        self.learning_rate = tf.Variable(0.25, name="learning_rate")


def build_checkpoints(run_dir):
    """A `TrainingCheckpoints` of fresh objects in `run_dir` (keeping every epoch end)."""
    return TrainingCheckpoints(
        RunDirectory(run_dir).absolute(),
        TinyModel(),
        TinyOptimizer(),
        TrainingState(learning_rate=0.25),
        PlateauSchedule(),
        keep=EPOCHS + 1,
        keep_epoch_ends=EPOCHS + 1,
    )


def end_epoch(checkpoints, epoch, loss=None):
    """What `Trainer._end_epoch` does: the epoch's step and weights, its validation loss
    (default `LOSSES[epoch]`) recorded, the epoch closed, then the save."""
    state = checkpoints.state
    state.step.assign(epoch * STEPS_PER_EPOCH)
    checkpoints.model.kernel.assign(tf.fill([4], float(epoch)))
    loss = LOSSES[epoch] if loss is None else loss
    improved = loss < float(state.best_valid_loss.numpy())
    if improved:
        state.best_valid_loss.assign(loss)
    state.epoch.assign(epoch)
    state.epoch_batches.assign(0)
    checkpoints.save(best=improved, epoch_end=True)


def _merge_halfway(prefixes, destination):
    """What a kill inside TensorFlow's merge leaves: the shards' data moved to
    `destination`'s names, half of its index written, the `_temp` folder kept."""
    count = len(prefixes)
    for shard, prefix in enumerate(prefixes):
        data = f"{prefix}.data-00000-of-00001"
        tf.io.gfile.rename(data, f"{destination}.data-{shard:05d}-of-{count:05d}")
    with tf.io.gfile.GFile(prefixes[0] + ".index", "rb") as f:
        index = f.read()
    with tf.io.gfile.GFile(destination + ".index", "wb") as f:
        f.write(index[: len(index) // 2])


@contextlib.contextmanager
def stop_at(checkpoints, point, stop):
    """Calls `stop()` (which must not return) at `point` of the next saves.

    Args:
        checkpoints: The `TrainingCheckpoints` whose saves to stop.
        point: One of `POINTS`.
        stop: Kills the process, or raises.
    """
    when, directory = point.split("_", 1)
    manager = getattr(checkpoints, MANAGERS[directory])
    target = os.path.normpath(manager.directory)
    save, merge = manager.save, gen_io_ops.merge_v2_checkpoints
    atomic_write = file_io.atomic_write_string_to_file

    def stopping_save(*args, **kwargs):
        if when == "before":
            stop()
        path = save(*args, **kwargs)
        if when == "after":
            stop()
        return path

    def stopping_merge(checkpoint_prefixes, destination_prefix, *args, **kwargs):
        destination = destination_prefix.numpy().decode()
        if os.path.dirname(os.path.normpath(destination)) == target:
            if when == "merging":
                _merge_halfway([p.numpy().decode() for p in checkpoint_prefixes], destination)
            stop()
        return merge(checkpoint_prefixes, destination_prefix, *args, **kwargs)

    def stopping_atomic_write(filename, contents, *args, **kwargs):
        if os.path.dirname(os.path.normpath(filename)) == target:
            file_io.write_string_to_file(f"{filename}.tmp{uuid.uuid4().hex}", contents)
            stop()
        return atomic_write(filename, contents, *args, **kwargs)

    manager.save = stopping_save
    if when in ("during", "merging"):
        gen_io_ops.merge_v2_checkpoints = stopping_merge
    if when == "state":
        file_io.atomic_write_string_to_file = stopping_atomic_write
    try:
        yield
    finally:
        del manager.save
        gen_io_ops.merge_v2_checkpoints = merge
        file_io.atomic_write_string_to_file = atomic_write


def _kill():
    os.kill(os.getpid(), signal.SIGKILL)


def main(run_dir, epoch, point):
    checkpoints = build_checkpoints(run_dir)
    for done in range(1, epoch):
        end_epoch(checkpoints, done)
    with stop_at(checkpoints, point, _kill):
        end_epoch(checkpoints, epoch)
    sys.exit(f"{point} of epoch {epoch}'s save was never reached")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
