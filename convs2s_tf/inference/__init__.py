"""Inference: one `Translator` interface over a checkpoint, a text export and a token-ids
export, and the factories that build translators and exports from a run or an export.

* `translator`: the `Translator` interface, `BATCH_SIZE`, the errors, and length-sorted
  batches translated two at a time (`Translator.translate_all`), or one per core
  (`search_one_batch_per_core`, as `pipelines.translate` does); it imports no other
  module of this package;
* `text_translators`: `CheckpointTranslator` and `SavedModelTranslator` (text in and out);
* `token_ids_translator`: `TokenIdsTranslator` (space-separated tokens in and out);
* `factory`: `open_translator`, `open_saved_model`, `load_inference_model` (a run, or an
  ensemble of runs: `model_dir="RUN_A,RUN_B"`);
* `ensembles`: what loading an ensemble checks (one checkpoint per run, shared
  vocabularies).

Builds on `convs2s_tf.decoding`, `convs2s_tf.export`, `convs2s_tf.interop` and
`convs2s_tf.runs`; none of them imports it.
"""

from convs2s_tf.inference.factory import (
    InferenceModel,
    load_inference_model,
    open_saved_model,
    open_translator,
)
from convs2s_tf.inference.text_translators import (
    CheckpointTranslator,
    SavedModelTranslator,
    TextFunctionsTranslator,
)
from convs2s_tf.inference.token_ids_translator import TokenIdsTranslator
from convs2s_tf.inference.translator import (
    BATCH_SIZE,
    InferenceError,
    Translator,
    UnsupportedRequestError,
)

__all__ = [
    "BATCH_SIZE",
    "CheckpointTranslator",
    "InferenceError",
    "InferenceModel",
    "SavedModelTranslator",
    "TextFunctionsTranslator",
    "TokenIdsTranslator",
    "Translator",
    "UnsupportedRequestError",
    "load_inference_model",
    "open_saved_model",
    "open_translator",
]
