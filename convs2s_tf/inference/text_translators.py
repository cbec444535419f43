"""Translators running a `TranslationModule`'s text functions: in process over a
checkpoint's model, or loaded from a text export."""

from __future__ import annotations

import collections
import functools
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import tensorflow as tf

from convs2s_tf.decoding.compiled_search import SearchBuckets, compiled_buckets
from convs2s_tf.export.exporters import DEFAULT_BUCKETS, warmup_texts
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
# The batch of a bucket on which a `CheckpointTranslator` made without warm-up compiles
# it (the first is searched in graph mode).
_COMPILE_ON_BATCH = 2


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
        function = self._function(signature, len(texts))
        return run_search(function, tf.constant(texts, dtype=tf.string))

    def _function(self, signature: str, batch_size: int) -> TextFunction:
        """The function that translates a batch of `batch_size` with `signature`."""
        del batch_size  # one function per signature, whatever the batch
        return self._functions[signature]

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

    Like the default float32 export, it searches batches that fit a bucket (up to 8
    sentences of up to 64 pieces) as one XLA computation per bucket, and larger batches
    in graph mode. Each bucket compiles once, in seconds:

    * with `warm_up`, all of them now, as loading an export replays its warm-up
      requests, so that no translation waits for a compilation;
    * without, a bucket compiles on its second batch: its first is searched in graph
      mode, so a one-off small batch (a one-sentence input, the last batch of a file)
      never pays for a compilation, while a stream of them pays once.

    Args:
        model: A built `ConvS2S`.
        tokenizer: Its `Tokenizer` (or an imported run's `VocabularyTokenizer`).
        search_config: A `SearchConfig` (default: its defaults).
        shortlist: A `Shortlist` every batch is decoded against, or None.
        buckets: The `SearchBuckets` compiled in float32 (default: the export's); None:
            graph mode only. A bfloat16 search is always in graph mode
            (`compiled_buckets`).
        warm_up: Compile every bucket and trace the graph-mode search now
            (`warmup_seconds` says how long); `open_translator` and
            `InferenceModel.translator` do by default.

    Raises:
        InferenceError: No tokenizer, or a search the model cannot run.
    """

    def __init__(
        self,
        model: ConvS2S | Ensemble,
        tokenizer: Tokenizer | VocabularyTokenizer | None,
        search_config: SearchConfig | None = None,
        shortlist: Shortlist | None = None,
        buckets: SearchBuckets | None = DEFAULT_BUCKETS,
        warm_up: bool = False,
    ) -> None:
        if tokenizer is None:
            raise InferenceError("Translating text needs the model's tokenizer; none given.")
        try:
            module = TranslationModule(model, tokenizer, search_config, shortlist=shortlist)
        except ValueError as error:  # SearchConfig.validate: the model's lengths
            raise InferenceError(str(error)) from None
        super().__init__(_module_functions(module), module.search_config.beam_size, module)
        self._buckets = compiled_buckets(buckets, module.search_config)
        # A second module over the same model, whose small batches run compiled: made
        # when a bucket is first compiled.
        self._make_compiled = functools.partial(
            TranslationModule, model, tokenizer, module.search_config, self._buckets, shortlist
        )
        self._compiled: TranslationModule | None = None
        self._compiled_functions: dict[str, TextFunction] = {}
        self._bucket_batches: collections.Counter[int] = collections.Counter()
        # translate_all searches two batches at once, from two threads.
        self._lock = threading.Lock()
        self.warmup_seconds = self.warm_up() if warm_up else 0.0

    def warm_up(self) -> float:
        """Compiles every bucket and traces the graph-mode search (translating a batch
        of each size); returns the seconds it took."""
        start = time.perf_counter()
        sizes = list(self._buckets.batch_sizes) if self._buckets is not None else []
        with self._lock:
            self._bucket_batches.update({size: _COMPILE_ON_BATCH for size in sizes})
        for size in sizes + [sizes[-1] + 1 if sizes else 1]:
            self.translate(warmup_texts(size))
        return time.perf_counter() - start

    def _function(self, signature: str, batch_size: int) -> TextFunction:
        buckets = self._buckets
        # Attention weights come from the graph-mode search alone (as in an export).
        if (
            buckets is None
            or batch_size > buckets.max_batch_size
            or signature == ATTENTION_SIGNATURE
        ):
            return self._functions[signature]
        bucket = next(size for size in buckets.batch_sizes if size >= batch_size)
        with self._lock:
            self._bucket_batches[bucket] += 1
            if self._bucket_batches[bucket] < _COMPILE_ON_BATCH:
                return self._functions[signature]
            if self._compiled is None:
                # (Kept here: a module's tf.functions hold it weakly.)
                self._compiled = self._make_compiled()
                self._compiled_functions = _module_functions(self._compiled)
        return self._compiled_functions[signature]

    def _nbest_error(self, nbest: int) -> str:
        return f"`nbest={nbest}` must be between 1 and `beam_size={self.beam_size}`."


def _module_functions(module: TranslationModule) -> dict[str, TextFunction]:
    return {
        TRANSLATE_SIGNATURE: module.translate,
        NBEST_SIGNATURE: module.translate_nbest,
        ATTENTION_SIGNATURE: module.translate_with_attention,
    }


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
