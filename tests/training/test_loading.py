"""`convs2s_tf.training.loading` re-exports `convs2s_tf.runs.loading`."""

from convs2s_tf import runs
from convs2s_tf.training import loading


def test_re_exports_the_runs_package():
    assert loading.read_run_config is runs.read_run_config
    assert loading.build_model is runs.build_model
    assert callable(loading.load_trained_model)
