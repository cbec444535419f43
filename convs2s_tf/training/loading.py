"""Moved to `convs2s_tf.runs.loading`; this re-export goes once its callers switch."""

from convs2s_tf.runs import loading as _loading
from convs2s_tf.runs.loading import build_model, find_checkpoint, read_run_config  # noqa: F401


def load_trained_model(model_dir, checkpoint=None, sentencepiece_model=None, compute_dtype=None):
    """`convs2s_tf.runs.load_trained_model` with interop's tokenizer for imported runs."""
    from convs2s_tf.interop import tokenizer_for_run

    return _loading.load_trained_model(
        model_dir, checkpoint, sentencepiece_model, compute_dtype, tokenizer_for_run
    )
