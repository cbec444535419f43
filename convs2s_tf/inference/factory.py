"""Building translators and exports from a run directory or an export directory.

    translator = open_translator(model_dir="runs/multi30k_en_de")      # its checkpoint
    translator = open_translator(saved_model="saved_models/multi30k_en_de")
    load_inference_model("runs/multi30k_en_de").export("saved_models/multi30k_en_de")

Whatever the case (a checkpoint, a text export, a token-ids export), the caller gets a
`Translator` and needs no further branching.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import tensorflow as tf

from convs2s_tf.decoding import Ensemble, SearchConfig
from convs2s_tf.export import find_saved_model, make_exporter
from convs2s_tf.export.translation_module import IDS_SIGNATURE, TRANSLATE_SIGNATURE
from convs2s_tf.inference.ensembles import (
    SEPARATOR,
    check_shared_vocabulary,
    member_checkpoints,
    split_paths,
)
from convs2s_tf.inference.text_translators import CheckpointTranslator, SavedModelTranslator
from convs2s_tf.inference.token_ids_translator import TokenIdsTranslator
from convs2s_tf.inference.translator import InferenceError, Translator
from convs2s_tf.interop import tokenizer_for_run
from convs2s_tf.runs import RunDirectory, VocabularyFiles, load_trained_model
from convs2s_tf.shortlist.shortlist import Shortlist

if TYPE_CHECKING:
    from convs2s_tf.data.tokenizer import Tokenizer
    from convs2s_tf.interop import VocabularyTokenizer
    from convs2s_tf.models import ConvS2S


@dataclasses.dataclass(frozen=True)
class InferenceModel:
    """A run's model restored for inference, with what translating or exporting it needs.

    Attributes:
        model: The built `ConvS2S`, or the `Ensemble` of several runs' models, in
            `search_config`'s dtype.
        tokenizer: Its tokenizer, or None (a run without a SentencePiece model).
        checkpoint: The checkpoint restored (an ensemble's, separated by commas).
        run_config: The run's `config.json` content (an ensemble's first run's).
        vocabulary_files: The token vocabularies of an imported run, or None.
        model_dir: The run directory (an ensemble's, separated by commas).
        search_config: The search, validated against the model.
        shortlist: The `Shortlist` translations and exports decode against, or None.
    """

    model: ConvS2S | Ensemble
    tokenizer: Tokenizer | VocabularyTokenizer | None
    checkpoint: str
    run_config: dict[str, Any]
    vocabulary_files: VocabularyFiles | None
    model_dir: str
    search_config: SearchConfig
    shortlist: Shortlist | None = None

    @property
    def exporter_name(self) -> str:
        """The exporter this run needs: `token_ids` for an imported run reading
        pre-tokenised text (its tokenisation lives outside the graph), else `ensemble`
        for several runs' models, else `text`."""
        tokenizer = self.tokenizer
        if self.vocabulary_files is not None and tokenizer is not None and tokenizer.pretokenized:
            return "token_ids"
        return "ensemble" if isinstance(self.model, Ensemble) else "text"

    def translator(self, warm_up: bool = True) -> CheckpointTranslator:
        """A `CheckpointTranslator` of the model with `search_config`'s search.

        Args:
            warm_up: Compile its buckets now, as loading an export does (see
                `CheckpointTranslator`); False: each on its second batch.

        Raises:
            InferenceError: The run has no tokenizer.
        """
        if self.tokenizer is None:
            raise InferenceError(
                f"{self.model_dir} names no SentencePiece model; give `sentencepiece_model`."
            )
        return CheckpointTranslator(
            self.model,
            self.tokenizer,
            self.search_config,
            shortlist=self.shortlist,
            warm_up=warm_up,
        )

    def export(
        self,
        export_dir: str,
        exporter: str | None = None,
        model_name: str | None = None,
        exporter_options: Mapping[str, Any] | None = None,
    ) -> str:
        """Exports the model with `exporter` (default: `exporter_name`), made with
        `exporter_options` (e.g. `{"buckets": None}`), to the next version of
        `export_dir`; returns the version directory.

        Raises:
            InferenceError: A text export of a run without a tokenizer.
        """
        exporter = exporter or self.exporter_name
        if exporter == "text" and self.tokenizer is None:
            raise InferenceError(
                "This run has no SentencePiece model; give `sentencepiece_model` to export "
                "text signatures."
            )
        options = dict(exporter_options or {}, shortlist=self.shortlist)
        return make_exporter(exporter, **options).export(
            self.model,
            export_dir,
            tokenizer=self.tokenizer,
            vocabulary_files=self.vocabulary_files,
            search_config=self.search_config,
            model_name=model_name,
        )


def load_inference_model(
    model_dir: str | Sequence[str],
    checkpoint: str | None = None,
    sentencepiece_model: str | None = None,
    search_config: SearchConfig | None = None,
    shortlist: str | None = None,
) -> InferenceModel:
    """Restores a run's model (or an ensemble of runs) in `search_config`'s dtype with its
    tokenizer.

    Args:
        model_dir: A run directory (trained, or imported from fairseq), or several
            separated by commas (or a list): an ensemble, as fairseq's `--path a.pt:b.pt`.
        checkpoint: A checkpoint path; default the best, else the latest. For an
            ensemble: one per run, separated by commas, or None.
        sentencepiece_model: Overrides the run's SentencePiece model (None: the run's;
            "": none, which an imported run reads as pre-tokenised text).
        search_config: A `SearchConfig` (default: its defaults).
        shortlist: A shortlist file to decode against (`pipelines.build_shortlist`), or
            None for the whole vocabulary.

    Raises:
        InferenceError: The tokenizer does not match the model's vocabulary, the runs of
            an ensemble do not share their vocabularies, or the search cannot work with
            the model (e.g. a `min_length` beyond its longest output).
        ShortlistError: The shortlist is missing, unreadable or for other vocabularies.
        FileNotFoundError, CheckpointError, VocabularyError: No usable run.
    """
    search_config = search_config or SearchConfig()
    model_dirs = split_paths(model_dir)
    if not model_dirs:
        raise InferenceError("Give a run directory (model_dir).")
    checkpoints = member_checkpoints(model_dirs, checkpoint)
    if len(model_dirs) > 1:
        # Compared before any model loads, which takes seconds per run.
        configs = [RunDirectory(path).read_config() for path in model_dirs]
        check_shared_vocabulary(model_dirs, configs, sentencepiece_model)
    loaded = [
        load_trained_model(
            member_dir,
            member_checkpoint,
            sentencepiece_model=sentencepiece_model,
            compute_dtype=search_config.dtype,
            # A run imported from fairseq reads its own dictionaries.
            tokenizer_factory=tokenizer_for_run,
        )
        for member_dir, member_checkpoint in zip(model_dirs, checkpoints)
    ]
    members = [member for member, _, _, _ in loaded]
    model = members[0] if len(members) == 1 else Ensemble(members)
    # An ensemble reads and writes text as its first member does (they share it).
    _, tokenizer, _, run_config = loaded[0]
    if tokenizer is not None and tokenizer.vocab_size != model.decoder.vocab_size:
        raise InferenceError(
            f"The SentencePiece model has {tokenizer.vocab_size} pieces but the model in "
            f"{model_dirs[0]} has {model.decoder.vocab_size}: they are from different "
            "vocabularies."
        )
    try:
        search_config = search_config.validate(model.decoder.max_length)
    except ValueError as error:
        raise InferenceError(str(error)) from None
    return InferenceModel(
        model=model,
        tokenizer=tokenizer,
        checkpoint=SEPARATOR.join(path for _, _, path, _ in loaded),
        run_config=run_config,
        vocabulary_files=RunDirectory(model_dirs[0]).vocabulary_files(run_config),
        model_dir=SEPARATOR.join(model_dirs),
        search_config=search_config,
        shortlist=_checked_shortlist(shortlist, model) if shortlist else None,
    )


def _checked_shortlist(path: str, model: ConvS2S | Ensemble) -> Shortlist:
    """The shortlist file `path`, refused unless built for `model`'s vocabulary sizes."""
    return Shortlist.load(path).check_vocabularies(
        model.encoder.vocab_size, model.decoder.vocab_size, name=f"Shortlist {path}"
    )


def open_saved_model(path: str, warm_up: bool = True) -> Translator:
    """The translator of an export: `SavedModelTranslator` for a text export,
    `TokenIdsTranslator` for a token-ids one.

    Args:
        path: A version directory, or an export base directory (its newest version).
        warm_up: Replay the export's warm-up requests while loading, as TF Serving does
            (every compiled bucket ready before the first translation); False: each
            bucket compiles when a batch first needs it, so a caller that translates a
            few batches compiles only the buckets they use.

    Raises:
        FileNotFoundError: `path` holds no SavedModel.
        InferenceError: A SavedModel with neither kind of translation signature.
    """
    version_dir = find_saved_model(path)
    if version_dir is None:
        raise FileNotFoundError(
            f"{path} holds no SavedModel (no saved_model.pb): give an export base directory "
            "or one of its version directories."
        )
    import tensorflow_text  # noqa: F401 (registers the SentencePiece ops of text exports)

    loaded = tf.saved_model.load(version_dir)
    if TRANSLATE_SIGNATURE in loaded.signatures:
        return SavedModelTranslator(version_dir, loaded, warm_up=warm_up)
    if IDS_SIGNATURE in loaded.signatures:
        return TokenIdsTranslator(version_dir, loaded, warm_up=warm_up)
    raise InferenceError(
        f"The SavedModel {version_dir} has neither a {TRANSLATE_SIGNATURE} nor a "
        f"{IDS_SIGNATURE} signature: it is not a translation export."
    )


def open_translator(
    *,
    saved_model: str | None = None,
    model_dir: str | Sequence[str] | None = None,
    checkpoint: str | None = None,
    sentencepiece_model: str | None = None,
    search_config: SearchConfig | None = None,
    warm_up: bool = True,
    shortlist: str | None = None,
) -> Translator:
    """The `Translator` of an export, or of a run's checkpoint.

    Args:
        saved_model: An export (base or version directory); when given, the other
            arguments are unused (its search is fixed at export time).
        model_dir: A run directory, translated from its checkpoint.
        checkpoint: The run's checkpoint to use (default: best, else latest).
        sentencepiece_model: See `load_inference_model`.
        search_config: The search of a checkpoint (default: `SearchConfig()`).
        warm_up: Whether an export replays its warm-up requests (see
            `open_saved_model`), or a checkpoint's translator compiles its buckets now
            (see `CheckpointTranslator`); either way, without it no translation is
            refused, only slower while a bucket compiles.
        shortlist: A shortlist file for a checkpoint's search (an export holds its own).

    Raises:
        InferenceError: Neither `saved_model` nor `model_dir`, or see
            `load_inference_model`, `InferenceModel.translator` and `open_saved_model`.
    """
    if saved_model:
        return open_saved_model(saved_model, warm_up=warm_up)
    if not model_dir:
        raise InferenceError("Give an export (saved_model) or a run directory (model_dir).")
    loaded = load_inference_model(
        model_dir, checkpoint, sentencepiece_model, search_config, shortlist
    )
    return loaded.translator(warm_up=warm_up)
