"""Export: SavedModels for TF Serving, chosen from a registry of exporters.

* `exporters`: the registry (`make_exporter("text")`, `make_exporter("token_ids")`,
  `make_exporter("ensemble")`, `list_exporters()`, `register_exporter`) and the
  `Exporter` base class;
* `translation_module`: the `tf.Module`s whose signatures an export serves;
* `saved_model`: TF Serving's layout (versions written atomically, server configs);
* `warmup`: the warm-up requests TF Serving replays on load.

Depends on `convs2s_tf.decoding`, `convs2s_tf.layers` and `convs2s_tf.vocabulary`;
translators over exports live in `convs2s_tf.inference`.
"""

from convs2s_tf.export.exporters import (
    SOURCE_DICT_ASSET,
    TARGET_DICT_ASSET,
    EnsembleExporter,
    Exporter,
    TextExporter,
    TokenIdsExporter,
    export_translator,
    list_exporters,
    make_exporter,
    register_exporter,
)
from convs2s_tf.export.saved_model import (
    find_saved_model,
    latest_version_dir,
    next_version,
    write_next_version,
    write_server_configs,
)
from convs2s_tf.export.translation_module import TokenIdsTranslationModule, TranslationModule
from convs2s_tf.export.warmup import WarmupRequest, write_warmup_requests

__all__ = [
    "EnsembleExporter",
    "Exporter",
    "SOURCE_DICT_ASSET",
    "TARGET_DICT_ASSET",
    "TextExporter",
    "TokenIdsExporter",
    "TokenIdsTranslationModule",
    "TranslationModule",
    "WarmupRequest",
    "export_translator",
    "find_saved_model",
    "latest_version_dir",
    "list_exporters",
    "make_exporter",
    "next_version",
    "register_exporter",
    "write_next_version",
    "write_server_configs",
    "write_warmup_requests",
]
