"""`convs2s_tf.training.checkpoints` re-exports `convs2s_tf.runs.checkpoints`."""

from convs2s_tf import runs
from convs2s_tf.training import checkpoints


def test_re_exports_the_runs_package():
    assert checkpoints.CheckpointError is runs.CheckpointError
    assert checkpoints.latest_checkpoint is runs.latest_checkpoint
