"""Command-line entry points over the convs2s_tf library: `python -m pipelines.NAME`.

Imported before any pipeline module, this package quiets TensorFlow's start-up (see
`pipelines.console`): TF_CPP_MIN_LOG_LEVEL only takes effect if set before TensorFlow is
first imported.
"""

from pipelines.console import configure_tensorflow_logging

configure_tensorflow_logging()
