"""Translators running a `TranslationModule`'s text functions: in process over a
checkpoint's model, or loaded from a text export."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import tensorflow as tf

from convs2s_tf.export.translation_module import (
    ATTENTION_SIGNATURE,
    NBEST_SIGNATURE,
    TEXT_SPEC,
    TRANSLATE_SIGNATURE,
    TranslationModule,
)
from convs2s_tf.export.warmup import replay_warmup_requests
from convs2s_tf.inference.translator import InferenceError, Translator, run_search

if TYPE_CHECKING:
    from convs2s_tf.data.tokenizer import Tokenizer
    from convs2s_tf.decoding import Ensemble, SearchConfig
    from convs2s_tf.interop.vocabulary_tokenizer import VocabularyTokenizer
    from convs2s_tf.models import ConvS2S
    from convs2s_tf.shortlist.shortlist import Shortlist

# A translation function: a `[batch]` string tensor in, its outputs by name out.
TextFunction = Callable[[tf.Tensor], Mapping[str, tf.Tensor]]


def _strings(tensor: Any) -> list[str]:
    return [value.decode("utf-8", errors="replace") for value in np.asarray(tensor).ravel()]


class TextFunctionsTranslator(Translator):
    """Runs the `translate`, `translate_nbest` and `translate_with_attention` functions of
    a `TranslationModule` (or of its SavedModel): text in, text out.

    Args:
        functions: {signature name: function of a `[batch]` string tensor}.
        beam_size: The search's beam size (what `translate_nbest` returns), or None.
        owner: The module or loaded SavedModel the functions belong to.
    """

    supports_attention = True

    def __init__(
        self, functions: Mapping[str, TextFunction], beam_size: int | None, owner: object
    ) -> None:
        # tf.function methods hold only a weak reference to their module: keep it alive.
        self._owner = owner
        self._functions = functions
        self.beam_size = self.max_nbest = beam_size

    def _call(self, signature: str, texts: list[str]) -> Mapping[str, tf.Tensor]:
        return run_search(self._functions[signature], tf.constant(texts, dtype=tf.string))

    def _translate(self, texts: list[str], nbest: int) -> list[list[tuple[str, float]]]:
        if nbest == 1:
            output = self._call(TRANSLATE_SIGNATURE, texts)
            return [
                [(text, float(score))]
                for text, score in zip(_strings(output["translation"]), output["score"].numpy())
            ]
        output = self._call(NBEST_SIGNATURE, texts)
        translations = np.asarray(output["translations"])
        scores = output["scores"].numpy()
        return [
            list(zip(_strings(row[:nbest]), [float(s) for s in score_row[:nbest]]))
            for row, score_row in zip(translations, scores)
        ]

    def _translate_with_attention(self, texts: list[str]) -> list[dict[str, Any]]:
        output = self._call(ATTENTION_SIGNATURE, texts)
        results = []
        for row in range(len(texts)):
            source_length = int(output["source_length"][row])
            target_length = int(output["target_length"][row])
            results.append(
                {
                    "translation": _strings(output["translation"][row])[0],
                    "score": float(output["score"][row]),
                    "attention": output["attention"][row, :target_length, :source_length].numpy(),
                    "source_pieces": _strings(output["source_pieces"][row, :source_length]),
                    "target_pieces": _strings(output["target_pieces"][row, :target_length]),
                }
            )
        return results


class CheckpointTranslator(TextFunctionsTranslator):
    """Translates with an in-process model (e.g. restored from a checkpoint).

    Args:
        model: A built `ConvS2S`.
        tokenizer: Its `Tokenizer` (or an imported run's `VocabularyTokenizer`).
        search_config: A `SearchConfig` (default: its defaults).
        shortlist: A `Shortlist` every batch is decoded against, or None.

    Raises:
        InferenceError: No tokenizer, or a search the model cannot run.
    """

    def __init__(
        self,
        model: ConvS2S | Ensemble,
        tokenizer: Tokenizer | VocabularyTokenizer | None,
        search_config: SearchConfig | None = None,
        shortlist: Shortlist | None = None,
    ) -> None:
        if tokenizer is None:
            raise InferenceError("Translating text needs the model's tokenizer; none given.")
        try:
            module = TranslationModule(model, tokenizer, search_config, shortlist=shortlist)
        except ValueError as error:  # SearchConfig.validate: the model's lengths
            raise InferenceError(str(error)) from None
        functions = {
            TRANSLATE_SIGNATURE: module.translate,
            NBEST_SIGNATURE: module.translate_nbest,
            ATTENTION_SIGNATURE: module.translate_with_attention,
        }
        super().__init__(functions, module.search_config.beam_size, module)

    def _nbest_error(self, nbest: int) -> str:
        return f"`nbest={nbest}` must be between 1 and `beam_size={self.beam_size}`."


class SavedModelTranslator(TextFunctionsTranslator):
    """Translates with a text export (`make_exporter("text")`): its search is the one
    fixed at export time.

    Loading replays the export's warm-up requests, as TF Serving does, so that no
    translation waits for a graph optimisation or an XLA compilation.

    Args:
        path: The SavedModel (version) directory.
        loaded: The SavedModel already loaded from `path`, if it is.
        warm_up: Replay the warm-up requests now (`warmup_seconds` says how long).
    """

    def __init__(self, path: str, loaded: Any = None, warm_up: bool = True) -> None:
        import tensorflow_text  # noqa: F401 (registers the SentencePiece ops of the export)

        loaded = loaded if loaded is not None else tf.saved_model.load(path)
        self.warmup_seconds = replay_warmup_requests(loaded, path) if warm_up else 0.0
        signatures = loaded.signatures
        nbest = signatures[NBEST_SIGNATURE].structured_outputs["scores"].shape[-1]
        functions = {
            name: _keyword_call(signatures[name], TEXT_SPEC.name)
            for name in (TRANSLATE_SIGNATURE, NBEST_SIGNATURE, ATTENTION_SIGNATURE)
        }
        super().__init__(functions, int(nbest) if nbest is not None else None, loaded)
        self.path = path

    def _nbest_error(self, nbest: int) -> str:
        return (
            f"`nbest={nbest}` must be between 1 and the SavedModel's beam size "
            f"{self.beam_size}."
        )


def _keyword_call(signature: Any, input_name: str) -> TextFunction:
    # Signatures take their inputs by name only.
    return lambda tensor: signature(**{input_name: tensor})
