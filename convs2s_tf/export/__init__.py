"""Export: the SavedModel translator and TF Serving's layout and configs."""

from convs2s_tf.export.saved_model import (
    export_translator,
    latest_version_dir,
    next_version,
    write_server_configs,
)
from convs2s_tf.export.translation_module import TranslationModule

__all__ = [
    "TranslationModule",
    "export_translator",
    "latest_version_dir",
    "next_version",
    "write_server_configs",
]
