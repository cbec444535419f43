"""The translator of a token-ids export: space-separated tokens in and out."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import tensorflow as tf

from convs2s_tf.export import SOURCE_DICT_ASSET, TARGET_DICT_ASSET
from convs2s_tf.export.translation_module import IDS_SIGNATURE, IDS_SPEC
from convs2s_tf.export.warmup import ASSETS_EXTRA, replay_warmup_requests
from convs2s_tf.inference.translator import Translator, run_search
from convs2s_tf.interop.fairseq_dictionary import Dictionary
from convs2s_tf.vocabulary import PAD_ID


class TokenIdsTranslator(Translator):
    """Translates space-separated tokens with a `translate_ids` export
    (`make_exporter("token_ids")`).

    Tokens are mapped with the dictionaries shipped in the export's `assets.extra/`
    (unknown ones to `<unk>`), and output ids back to tokens joined by spaces: what a
    checkpoint translator does with the same run. The signature returns the best
    hypothesis alone and no attention.

    Loading replays the export's warm-up requests, as TF Serving does.

    Args:
        path: The SavedModel (version) directory.
        loaded: The SavedModel already loaded from `path`, if it is.
        warm_up: Replay the warm-up requests now (`warmup_seconds` says how long).
    """

    max_nbest = 1
    supports_attention = False

    def __init__(self, path: str, loaded: Any = None, warm_up: bool = True) -> None:
        self._loaded = loaded if loaded is not None else tf.saved_model.load(path)
        self.warmup_seconds = replay_warmup_requests(self._loaded, path) if warm_up else 0.0
        self._translate_ids = self._loaded.signatures[IDS_SIGNATURE]
        extra = os.path.join(path, ASSETS_EXTRA)
        self.source_dictionary = Dictionary.load(os.path.join(extra, SOURCE_DICT_ASSET))
        self.target_dictionary = Dictionary.load(os.path.join(extra, TARGET_DICT_ASSET))
        self.path = path

    def _encode(self, texts: list[str]) -> np.ndarray:
        rows = [self.source_dictionary.encode_line(text) for text in texts]
        width = max([len(row) for row in rows] + [1])
        ids = np.full([len(rows), width], PAD_ID, np.int32)
        for index, row in enumerate(rows):
            ids[index, : len(row)] = row
        return ids

    def _translate(self, texts: list[str], nbest: int) -> list[list[tuple[str, float]]]:
        del nbest  # 1, checked by `translate`
        output = run_search(
            self._translate_ids, **{IDS_SPEC.name: tf.constant(self._encode(texts))}
        )
        output_ids, lengths = output["output_ids"].numpy(), output["length"].numpy()
        return [
            [(self.target_dictionary.decode_ids(row[:length]), float(score))]
            for row, length, score in zip(output_ids, lengths, output["score"].numpy())
        ]

    def _nbest_error(self, nbest: int) -> str:
        return self._attention_error()

    def _attention_error(self) -> str:
        return (
            "This export has the translate_ids signature only (best hypothesis, no "
            "attention); translate from the run (`model_dir`) for `nbest` and `attention`."
        )
