"""Exporters: the kinds of SavedModel a trained model is exported as, chosen by name.

    exporter = make_exporter("text")
    version_dir = exporter.export(model, "saved_models/NAME", tokenizer=tokenizer)

* `text`: strings in and out, the SentencePiece tokenizer inside the graph
  (`TextExporter`).
* `token_ids`: token ids in and out, for an imported fairseq model that reads text
  tokenised outside the graph (`TokenIdsExporter`).
* `ensemble`: the `text` signatures over an `Ensemble` (or a list of models sharing
  their vocabularies): every member in one SavedModel (`EnsembleExporter`).

A new kind subclasses `Exporter` and registers itself with
`@register_exporter(name)`. Every exporter writes through the same versioned, atomic
writer (`write_next_version`) and warm-up writer (`write_warmup_requests`), so each
export is a complete TF Serving version with warm-up requests and server configs.

By default small batches are searched by one XLA computation per fixed bucket
(`SearchBuckets`: batches of up to 8 sentences of up to 64 tokens; larger ones in graph
mode; with int8 weights, up to 128 sentences), and the warm-up requests cover every
bucket, so that a server compiles them all while it loads the version (TF Serving needs
`--xla_cpu_compilation_enabled=true`). `make_exporter(name, buckets=None)` exports
graph-mode searches alone.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import tensorflow as tf

from convs2s_tf.decoding import Ensemble, SearchConfig
from convs2s_tf.decoding.compiled_search import SearchBuckets, compiled_buckets
from convs2s_tf.export.saved_model import (
    check_model_name,
    default_model_name,
    write_next_version,
)
from convs2s_tf.export.translation_module import (
    ATTENTION_SIGNATURE,
    IDS_SIGNATURE,
    IDS_SPEC,
    NBEST_SIGNATURE,
    TEXT_SPEC,
    TRANSLATE_SIGNATURE,
    TokenIdsTranslationModule,
    TranslationModule,
)
from convs2s_tf.export.warmup import ASSETS_EXTRA, WarmupRequest, write_warmup_requests
from convs2s_tf.vocabulary import PAD_ID

if TYPE_CHECKING:
    from convs2s_tf.data.tokenizer import Tokenizer
    from convs2s_tf.interop.vocabulary_tokenizer import VocabularyTokenizer
    from convs2s_tf.models import ConvS2S
    from convs2s_tf.runs import VocabularyFiles
    from convs2s_tf.shortlist.shortlist import Shortlist

_EXPORTERS: dict[str, type[Exporter]] = {}
_E = TypeVar("_E", bound="Exporter")
DEFAULT_BUCKETS = SearchBuckets()
# Warm-up rows of translate_ids, cycled to fill each warm-up batch (ids beyond the
# vocabulary become <unk>).
WARMUP_IDS = ([4, 5, 6, 7], [8, 9, PAD_ID, PAD_ID])


def register_exporter(name: str) -> Callable[[type[_E]], type[_E]]:
    """Class decorator registering an `Exporter` subclass under `name`."""

    def register(exporter_class: type[_E]) -> type[_E]:
        if name in _EXPORTERS:
            raise ValueError(f"An exporter named {name!r} is registered already.")
        if not issubclass(exporter_class, Exporter):
            raise TypeError(f"{exporter_class.__name__} is not an Exporter.")
        exporter_class.name = name
        _EXPORTERS[name] = exporter_class
        return exporter_class

    return register


def list_exporters() -> list[str]:
    """The registered exporter names, sorted."""
    return sorted(_EXPORTERS)


def make_exporter(name: str, **kwargs: Any) -> Exporter:
    """A new exporter of the kind registered as `name`, built with `kwargs`.

    Raises:
        ValueError: No exporter is registered under `name`.
    """
    if name not in _EXPORTERS:
        raise ValueError(f"Unknown exporter {name!r}; known: {', '.join(list_exporters())}.")
    return _EXPORTERS[name](**kwargs)


class Exporter(abc.ABC):
    """Writes one kind of SavedModel as the next version of an export directory.

    Args:
        buckets: The `SearchBuckets` whose batches are searched by one XLA computation
            each (default: `SearchBuckets()`) in a float32 export, followed by larger
            ones with int8 weights; None: every search in graph mode (for servers
            without XLA). A bfloat16 export always searches in graph mode
            (`compiled_buckets`).
        shortlist: A `Shortlist` every batch is decoded against (stored in the export),
            or None: the whole vocabulary.
    """

    name: str | None = None  # set by `register_exporter`

    def __init__(
        self, buckets: SearchBuckets | None = DEFAULT_BUCKETS, shortlist: Shortlist | None = None
    ) -> None:
        self.buckets = buckets
        self.shortlist = shortlist

    def export(
        self,
        model: ConvS2S | Ensemble,
        export_dir: str,
        *,
        tokenizer: Tokenizer | VocabularyTokenizer | None = None,
        vocabulary_files: VocabularyFiles | None = None,
        search_config: SearchConfig | None = None,
        model_name: str | None = None,
    ) -> str:
        """Exports `model` to `export_dir/<next version>/`.

        Args:
            model: A built `ConvS2S` (or an `Ensemble` of them).
            export_dir: Base directory in TF Serving's layout (versions below it).
            tokenizer: The model's tokenizer, for exporters with text signatures.
            vocabulary_files: The token vocabularies of an imported run (a
                `convs2s_tf.runs.VocabularyFiles`), for exporters that ship them.
            search_config: A `SearchConfig` (default: its defaults), fixed in the export.
            model_name: Name in `models.config` and the warm-up requests (default: the
                base name of `export_dir`).

        Returns:
            The version directory written.

        Raises:
            ValueError: This exporter needs an input that was not given, TF Serving
                cannot serve a model of that name, or `search_config.xla` is set.
        """
        if search_config is not None and search_config.xla:
            # A server cannot bound what such an export compiles; the buckets are bounded.
            raise ValueError(
                "An export cannot search with xla (xla_decode): every batch size and source "
                "length its requests bring would compile a program of its own, without "
                "bound. Exports compile a fixed set of buckets at load instead "
                "(xla_small_batches, on by default)."
            )
        model_name = model_name or default_model_name(export_dir)
        check_model_name(model_name)  # before the module's tracing, which takes a while
        assets = self.extra_assets(vocabulary_files)
        module = self.build_module(model, tokenizer, search_config)

        def write(directory: str) -> None:
            tf.saved_model.save(module, directory, signatures=module.signatures())
            write_warmup_requests(directory, model_name, self.warmup_requests(search_config))
            for name, path in assets.items():
                tf.io.gfile.copy(path, os.path.join(directory, ASSETS_EXTRA, name), overwrite=True)

        return write_next_version(export_dir, write, model_name)

    def compiled_buckets(self, search_config: SearchConfig | None) -> SearchBuckets | None:
        """The buckets of an export's search: `buckets` in float32, None in bfloat16
        (`convs2s_tf.decoding.compiled_search.compiled_buckets`)."""
        return compiled_buckets(self.buckets, search_config or SearchConfig())

    @abc.abstractmethod
    def build_module(
        self,
        model: ConvS2S | Ensemble,
        tokenizer: Tokenizer | VocabularyTokenizer | None,
        search_config: SearchConfig | None,
    ) -> TranslationModule:
        """The `tf.Module` to save; its `signatures()` are what the export serves."""

    @abc.abstractmethod
    def warmup_requests(self, search_config: SearchConfig | None = None) -> list[WarmupRequest]:
        """The `WarmupRequest`s TF Serving replays when it loads the export of a search
        in `search_config` (default: `SearchConfig()`)."""

    def warmup_batch_sizes(self, search_config: SearchConfig | None = None) -> list[int]:
        """Batch sizes the warm-up requests of a searching signature cover: every bucket
        the search compiles (`compiled_buckets`, so that none compiles on a client's
        request), then one batch above them, for the graph path."""
        buckets = self.compiled_buckets(search_config)
        sizes = list(buckets.batch_sizes) if buckets is not None else [1]
        return sizes + [sizes[-1] + 1]

    def extra_assets(self, vocabulary_files: VocabularyFiles | None) -> dict[str, str]:
        """{file name: path} of the files copied into the export's `assets.extra/`."""
        del vocabulary_files  # most exports carry everything in the graph
        return {}


# Warm-up sentences of the text export, cycled to fill each warm-up batch: short and
# longer ones, and an empty one.
WARMUP_TEXTS = (
    "A man is riding a bicycle down the street.",
    "Two dogs are playing in the snow.",
    "",
    "A little girl in a pink dress is smiling at the camera.",
)


def _cycled(values: Sequence[Any], count: int) -> list[Any]:
    return [values[index % len(values)] for index in range(count)]


def warmup_texts(count: int) -> list[str]:
    """`count` warm-up sentences (`WARMUP_TEXTS`, cycled)."""
    return _cycled(WARMUP_TEXTS, count)


@register_exporter("text")
class TextExporter(Exporter):
    """Signatures `serving_default`, `translate_nbest`, `translate_with_attention` (text
    in, text out) and `translate_ids`, with the tokenizer in the graph; see
    `TranslationModule`."""

    def build_module(
        self,
        model: ConvS2S | Ensemble,
        tokenizer: Tokenizer | VocabularyTokenizer | None,
        search_config: SearchConfig | None,
    ) -> TranslationModule:
        if tokenizer is None:
            raise ValueError("The text export needs the model's tokenizer.")
        buckets = self.compiled_buckets(search_config)
        return TranslationModule(model, tokenizer, search_config, buckets, self.shortlist)

    def warmup_requests(self, search_config: SearchConfig | None = None) -> list[WarmupRequest]:
        def text(count: int) -> dict[str, tf.Tensor]:
            return {TEXT_SPEC.name: tf.constant(warmup_texts(count), tf.string)}

        # serving_default in every bucket; each other signature once (the compiled
        # buckets are shared by the signatures).
        requests = [
            WarmupRequest(TRANSLATE_SIGNATURE, text(n))
            for n in self.warmup_batch_sizes(search_config)
        ]
        requests += [
            WarmupRequest(NBEST_SIGNATURE, text(1)),
            WarmupRequest(ATTENTION_SIGNATURE, text(2)),
            WarmupRequest(IDS_SIGNATURE, {IDS_SPEC.name: tf.constant([WARMUP_IDS[0]], tf.int32)}),
        ]
        return requests


@register_exporter("ensemble")
class EnsembleExporter(TextExporter):
    """The `text` export of an ensemble, as fairseq's `--path a.pt:b.pt` translates: every
    member's variables in the SavedModel and every signature served, each search step
    combining the members' distributions (`convs2s_tf.decoding.Ensemble`).

    `model` is an `Ensemble`, or a list of built `ConvS2S` models sharing their
    vocabularies (made into one).
    """

    def build_module(
        self,
        model: ConvS2S | Ensemble | Sequence[ConvS2S],
        tokenizer: Tokenizer | VocabularyTokenizer | None,
        search_config: SearchConfig | None,
    ) -> TranslationModule:
        if isinstance(model, (list, tuple)):
            model = Ensemble(model)
        if not isinstance(model, Ensemble):
            raise ValueError(
                f"The ensemble export needs an Ensemble or a list of models, got "
                f"{type(model).__name__}."
            )
        return super().build_module(model, tokenizer, search_config)


SOURCE_DICT_ASSET = "source_dict.txt"
TARGET_DICT_ASSET = "target_dict.txt"


@register_exporter("token_ids")
class TokenIdsExporter(Exporter):
    """The `translate_ids` signature alone, for an imported fairseq model without a
    SentencePiece model (its text is tokenised outside the graph; for the authors' WMT
    models: Moses tokenisation, then subword-nmt BPE).

    `source_ids` `[batch, time]` int32 (one sentence per row, no `</s>`, right-padded
    with `<pad>` = 1) in; `output_ids` (ending in `</s>`, then `<pad>`), `length` and
    `score` out. The two dictionaries travel in `assets.extra/` (`source_dict.txt`,
    `target_dict.txt`) so that clients map tokens to ids exactly as the model does.
    """

    def build_module(
        self,
        model: ConvS2S | Ensemble,
        tokenizer: Tokenizer | VocabularyTokenizer | None,
        search_config: SearchConfig | None,
    ) -> TranslationModule:
        del tokenizer  # the text stays outside the graph
        buckets = self.compiled_buckets(search_config)
        return TokenIdsTranslationModule(model, search_config, buckets, self.shortlist)

    def warmup_requests(self, search_config: SearchConfig | None = None) -> list[WarmupRequest]:
        return [
            WarmupRequest(
                IDS_SIGNATURE, {IDS_SPEC.name: tf.constant(_cycled(WARMUP_IDS, n), tf.int32)}
            )
            for n in self.warmup_batch_sizes(search_config)
        ]

    def extra_assets(self, vocabulary_files: VocabularyFiles | None) -> dict[str, str]:
        if vocabulary_files is None:
            raise ValueError("The token_ids export ships the run's dictionaries: none given.")
        return {
            SOURCE_DICT_ASSET: vocabulary_files.source,
            TARGET_DICT_ASSET: vocabulary_files.target,
        }


def export_translator(
    model: ConvS2S | Ensemble,
    tokenizer: Tokenizer | VocabularyTokenizer,
    export_dir: str,
    search_config: SearchConfig | None = None,
    model_name: str | None = None,
) -> str:
    """`make_exporter("text").export(...)` in one call; returns the version directory."""
    return make_exporter("text").export(
        model, export_dir, tokenizer=tokenizer, search_config=search_config, model_name=model_name
    )
