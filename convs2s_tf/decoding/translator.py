"""Moved: translators live in `convs2s_tf.inference`, which builds on decoding and export.

This module only forwards `Translator` and `BATCH_SIZE` for callers not yet moved
(`from convs2s_tf.inference import Translator, BATCH_SIZE` replaces it); delete it once
none is left. It imports `convs2s_tf.inference` when one of those names is read, never at
import time, so loading `convs2s_tf.decoding` loads neither export nor inference.
"""

import warnings

_MOVED = ("BATCH_SIZE", "Translator")


def __getattr__(name):
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"convs2s_tf.decoding.translator.{name} moved to convs2s_tf.inference.{name}.",
        DeprecationWarning,
        stacklevel=2,
    )
    from convs2s_tf import inference

    return getattr(inference, name)
