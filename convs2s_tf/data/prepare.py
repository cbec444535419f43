"""Data preparation: corpus -> cleaned text -> joint BPE model -> tokenised shards, once.

`prepare_data` reads and cleans every split, trains the BPE model on (a sample of) the
training text, writes every split as tokenised TFRecord shards with a lengths index
(`shard_writer`), then the summary and, last, the fingerprint; the files it writes are
listed in `data_directory`. It writes them into a folder of its own and publishes that
whole, by a rename (`publication`). Several processes may call it on one directory at
once (the workers of a multi-host run on a shared filesystem): one prepares, the others
wait for it (`preparation_lock`); if two prepare after all (a holder paused past the
lock's timeout), one publishes and the other discards its copy. The names of
`data_directory` are also importable from here.
"""

import dataclasses
import math
import os
from collections.abc import Callable, Mapping
from typing import Any

import sentencepiece as spm
from absl import logging

from convs2s_tf.data import bpe, publication
from convs2s_tf.data.cleaning import CleaningConfig, CleaningReport, clean_pairs, normalize_pairs
from convs2s_tf.data.data_directory import (
    FINGERPRINT_FILE,
    SENTENCEPIECE_PREFIX,
    SUMMARY_FILE,
    TFDS_SUBDIR,
    PreparedData,
    outputs_exist,
    read_summary,
    split_paths,
    write_split,
    write_summary,
)
from convs2s_tf.data.fingerprint import (
    compute_fingerprint,
    read_fingerprint,
    write_fingerprint,
)
from convs2s_tf.data.length_index import index_file_name
from convs2s_tf.data.preparation_lock import PreparationLock, prepare_once
from convs2s_tf.data.shard_writer import ShardSpec, write_shards
from convs2s_tf.data.sources import ParallelSource, file_sha256, make_source
from convs2s_tf.data.text_files import LineDecoder

__all__ = [
    "FINGERPRINT_FILE",
    "FORMAT_VERSION",
    "SENTENCEPIECE_PREFIX",
    "SUMMARY_FILE",
    "TFDS_SUBDIR",
    "PrepareConfig",
    "PreparedData",
    "PrepareResult",
    "prepare_data",
    "split_paths",
]

# Bump when the prepared files change meaning, so existing data directories are redone.
# 3: in a version folder, published whole; shard sizes and checksums in the lengths
# indexes. 2: tokenised TFRecord shards and lengths indexes next to the text (1: text).
FORMAT_VERSION = 3
# Training shards hold about this many pairs (and there are at least _MIN_TRAIN_SHARDS,
# so that the workers of a multi-host run each get whole files in fair numbers).
_PAIRS_PER_SHARD = 100_000
_MIN_TRAIN_SHARDS = 32


@dataclasses.dataclass(frozen=True)
class PrepareConfig:
    """What to prepare and how.

    Attributes:
        data_dir: output directory (BPE model, vocabulary, prepared text, summary).
        dataset: "multi30k", "local", or a tfds catalog name such as "wmt14_translate/de-en".
        source_lang: source language code.
        target_lang: target language code.
        split_prefixes: for "local": split ("train", "validation", "test") -> file prefix.
        tfds_data_dir: tfds data directory; default `{data_dir}/tfds`.
        vocab_size: SentencePiece vocabulary size, special tokens included.
        cleaning: training-set cleaning thresholds.
        invalid_utf8: "error" (fail naming file and line) or "replace" (U+FFFD, counted).
        bpe_character_coverage: SentencePiece character coverage.
        bpe_max_sentences: train BPE on a seeded sample of this many sentences, drawn
            from the whole training text, when it has more (0: always all of it).
        seed: seed of that sample, of the shard assignment and of the shuffle.
        num_shards: training shards (0: one per 100,000 pairs, at least 32).
        workers: tokenising processes (0: one per CPU core).
        sentencepiece_model: an existing SentencePiece model to tokenise with instead of
            training one (its ids then mean what they mean elsewhere, e.g. in a teacher's
            data); the BPE options are unused and its SHA-256 is in the fingerprint.
    """

    data_dir: str
    dataset: str = "multi30k"
    source_lang: str = "en"
    target_lang: str = "de"
    split_prefixes: Mapping[str, str] = dataclasses.field(default_factory=dict)
    tfds_data_dir: str | None = None
    vocab_size: int = 8000
    cleaning: CleaningConfig = dataclasses.field(default_factory=CleaningConfig)
    invalid_utf8: str = "error"
    bpe_character_coverage: float = 1.0
    bpe_max_sentences: int = 2_000_000
    seed: int = 1
    num_shards: int = 0
    workers: int = 0
    sentencepiece_model: str | None = None

    @property
    def resolved_tfds_data_dir(self) -> str:
        return self.tfds_data_dir or os.path.join(self.data_dir, TFDS_SUBDIR)

    def output_options(self) -> dict[str, Any]:
        """Returns the options the outputs depend on (not where anything is stored): with
        an existing SentencePiece model, its SHA-256 instead of the BPE options.

        Raises:
            FileNotFoundError: `sentencepiece_model` names no file.
        """
        options = {
            "dataset": self.dataset,
            "source_lang": self.source_lang,
            "target_lang": self.target_lang,
            "vocab_size": self.vocab_size,
            "cleaning": dataclasses.asdict(self.cleaning),
            "invalid_utf8": self.invalid_utf8,
            "bpe_character_coverage": self.bpe_character_coverage,
            "bpe_max_sentences": self.bpe_max_sentences,
            "seed": self.seed,
            "num_shards": self.num_shards,
        }
        if self.sentencepiece_model:
            for key in ("vocab_size", "bpe_character_coverage", "bpe_max_sentences"):
                del options[key]
            bpe.load_bpe_model(self.sentencepiece_model)  # A missing or unusable model fails here.
            options["sentencepiece_model_sha256"] = file_sha256(self.sentencepiece_model)
        return options


@dataclasses.dataclass(frozen=True)
class PrepareResult:
    """Outcome of `prepare_data`: the summary, and whether existing outputs were reused."""

    summary: dict[str, Any]
    reused: bool
    data: PreparedData


def prepare_data(
    config: PrepareConfig,
    *,
    force: bool = False,
    host_checker: Callable[[str], bool] | None = None,
    lock_options: Mapping[str, Any] | None = None,
) -> PrepareResult:
    """Prepares `config.data_dir` (see `data_directory`), unless it is up to date.

    Args:
        config: what to prepare.
        force: prepare even if the fingerprint matches.
        host_checker: see `sources.TfdsSource` (tests pass a stub).
        lock_options: keyword arguments of `PreparationLock` (`stale_seconds`, ...).

    Returns:
        The summary (also in `summary.json`) and whether the outputs were reused.

    Raises:
        CorpusFileNotFoundError, LineCountMismatchError, InvalidUtf8Error,
        DatasetUnavailableError, SentencePieceModelError: see `convs2s_tf.data.errors`.
    """
    os.makedirs(config.data_dir, exist_ok=True)
    source = make_source(
        config.dataset,
        config.source_lang,
        config.target_lang,
        split_prefixes=dict(config.split_prefixes),
        tfds_data_dir=config.resolved_tfds_data_dir,
        host_checker=host_checker,
    )
    identity = _identity(config, source)
    fingerprint = compute_fingerprint(identity)
    version = os.path.join(config.data_dir, publication.version_name(fingerprint))
    splits = list(source.splits)

    def is_prepared() -> bool:
        return not force and _prepared_folder(config, splits, fingerprint) is not None

    def prepare(lock: PreparationLock) -> dict[str, Any]:
        return _prepare(config, source, identity, fingerprint, version, lock)

    summary, prepared = prepare_once(
        config.data_dir, is_prepared, prepare, pass_lock=True, **(lock_options or {})
    )
    if not prepared:
        logging.info(
            "%s is up to date (fingerprint %s); nothing to do.", config.data_dir, fingerprint[:12]
        )
        data = PreparedData.load(_prepared_folder(config, splits, fingerprint) or version)
        if (
            data.data_dir == version
            and publication.resolve(config.data_dir, FINGERPRINT_FILE) != version
        ):
            # Another configuration's preparation pointed the directory elsewhere since.
            publication.write_pointer(config.data_dir, FINGERPRINT_FILE, version)
        return PrepareResult(summary=data.summary, reused=True, data=data)
    assert summary is not None
    return PrepareResult(summary=summary, reused=False, data=PreparedData.load(version))


def _prepared_folder(config: PrepareConfig, splits: list[str], fingerprint: str) -> str | None:
    """Returns the complete folder of `fingerprint`: its version folder, or the data
    directory itself if it is a copy of one (None if neither is complete)."""
    version = os.path.join(config.data_dir, publication.version_name(fingerprint))
    candidates = [version]
    if publication.resolve(config.data_dir, FINGERPRINT_FILE) == config.data_dir:
        candidates.append(config.data_dir)
    for folder in candidates:
        if read_fingerprint(os.path.join(folder, FINGERPRINT_FILE)) == fingerprint and (
            outputs_exist(folder, splits, config.source_lang, config.target_lang)
        ):
            return folder
    return None


def _prepare(
    config: PrepareConfig,
    source: ParallelSource,
    identity: dict[str, Any],
    fingerprint: str,
    version: str,
    lock: PreparationLock,
) -> dict[str, Any]:
    """Writes the whole data directory into a folder of its own, then publishes it as
    `version` (see `publication`); returns the summary."""
    # What `version` holds now, if anything: broken, or forced. Only that is replaced.
    replaces = publication.publication_id(version, FINGERPRINT_FILE)
    assert lock.token is not None
    folder = os.path.join(config.data_dir, publication.TEMPORARY_PREFIX + lock.token)
    if lock.still_held():
        # Folders of preparers that died, or lost the lock while paused.
        publication.remove_unfinished(config.data_dir, keep=folder)
    source.check()
    publication.new_temporary_folder(config.data_dir, lock.token)
    try:
        summary = _write_outputs(config, source, fingerprint, folder)
        # Last, so that a folder with a fingerprint is a complete one.
        write_fingerprint(
            os.path.join(folder, FINGERPRINT_FILE),
            fingerprint,
            identity,
            **{publication.PUBLICATION_KEY: os.path.basename(folder)},
        )
        publication.flush_folder(folder)
    except BaseException:
        publication.discard(folder)
        raise
    if publication.publish(folder, version, replaces, FINGERPRINT_FILE):
        logging.info("Published %s.", version)
    else:
        logging.warning(
            "%s was published by another preparer meanwhile; this one's copy is discarded.",
            version,
        )
        summary = read_summary(version)
    publication.write_pointer(config.data_dir, FINGERPRINT_FILE, version)
    publication.remove_other_versions(config.data_dir, version)
    return summary


def _write_outputs(
    config: PrepareConfig, source: ParallelSource, fingerprint: str, folder: str
) -> dict[str, Any]:
    """Writes the text, BPE model, shards and summary into `folder`; returns the summary."""
    splits = list(source.splits)
    split_summaries = {split: _write_clean_split(config, source, split, folder) for split in splits}
    if config.sentencepiece_model:
        prefix = os.path.join(folder, SENTENCEPIECE_PREFIX)
        processor = bpe.install_bpe_model(config.sentencepiece_model, prefix)
    else:
        processor = _train_bpe(config, split_summaries["train"]["pairs_kept"], folder)
    for split, split_summary in split_summaries.items():
        split_summary.update(
            _write_split_shards(config, split, split_summary["pairs_kept"], folder)
        )
    summary = _summary(config, fingerprint, processor, split_summaries)
    write_summary(folder, summary)
    return summary


def _identity(config: PrepareConfig, source: ParallelSource) -> dict[str, Any]:
    """Returns everything the outputs depend on: the fingerprint is computed from it."""
    return {
        "format_version": FORMAT_VERSION,
        "sentencepiece_version": spm.__version__,
        "options": config.output_options(),
        "inputs": source.describe(),
        "splits": list(source.splits),
    }


def _write_clean_split(
    config: PrepareConfig, source: ParallelSource, split: str, folder: str
) -> dict:
    """Reads `split`, cleans it (training) or normalises it (evaluation), and writes it
    into `folder`.

    Returns:
        The split's summary so far: pairs kept and dropped per rule, and the lines whose
        invalid UTF-8 was replaced, per file.
    """
    source_path, target_path = split_paths(folder, split, config.source_lang, config.target_lang)
    logging.info("Reading the %s split of %s", split, config.dataset)
    decoder = LineDecoder(config.invalid_utf8)
    report = CleaningReport()
    pairs = source.read_split(split, decoder)
    if split == "train":
        kept = clean_pairs(pairs, config.cleaning, report)
    else:
        # Evaluation sets are kept whole: BLEU must cover every reference.
        kept = normalize_pairs(pairs, report)
    write_split(kept, source_path, target_path)
    split_summary = report.as_dict()
    split_summary["invalid_utf8_lines_replaced"] = dict(decoder.replaced_lines)
    logging.info("%s: %s", split, split_summary)
    return split_summary


def _bpe_sample(config: PrepareConfig, train_pairs: int) -> int:
    """Returns the sentences the BPE model trains on as a sample (0: all of them)."""
    sample = config.bpe_max_sentences
    return sample if sample and 2 * train_pairs > sample else 0


def _train_bpe(config: PrepareConfig, train_pairs: int, folder: str) -> spm.SentencePieceProcessor:
    """Trains the joint BPE model on the prepared training text (or a sample drawn from
    all of it, see `PrepareConfig.bpe_max_sentences`) and returns it, loaded."""
    train_source, train_target = split_paths(
        folder, "train", config.source_lang, config.target_lang
    )
    sample = _bpe_sample(config, train_pairs)
    logging.info(
        "Training a %d-piece joint BPE model on %s",
        config.vocab_size,
        f"a sample of {sample} sentences" if sample else "all the training text",
    )
    model_path, _ = bpe.train_bpe(
        [train_source, train_target],
        os.path.join(folder, SENTENCEPIECE_PREFIX),
        config.vocab_size,
        character_coverage=config.bpe_character_coverage,
        max_sentences=sample,
        seed=config.seed,
    )
    processor = spm.SentencePieceProcessor(model_file=model_path)
    bpe.check_special_ids(processor)
    return processor


def num_train_shards(config: PrepareConfig, train_pairs: int) -> int:
    """Returns the training shards to write: `config.num_shards`, else one per 100,000
    pairs and at least 32."""
    if config.num_shards:
        return config.num_shards
    return max(_MIN_TRAIN_SHARDS, math.ceil(train_pairs / _PAIRS_PER_SHARD))


def _write_split_shards(
    config: PrepareConfig, split: str, pairs: int, folder: str
) -> dict[str, Any]:
    """Writes `split`'s shards and lengths index into `folder`; returns its per-side
    statistics."""
    source_path, target_path = split_paths(folder, split, config.source_lang, config.target_lang)
    training = split == "train"
    spec = ShardSpec(
        split=split,
        source_path=source_path,
        target_path=target_path,
        num_shards=num_train_shards(config, pairs) if training else 1,
        evaluation=not training,
        seed=config.seed,
    )
    logging.info("Writing %d shard(s) of the %s split", spec.num_shards, split)
    model_path = os.path.join(folder, SENTENCEPIECE_PREFIX + ".model")
    workers = config.workers or os.cpu_count() or 1
    return write_shards(spec, folder, model_path, workers=workers)


def _summary(
    config: PrepareConfig,
    fingerprint: str,
    processor: spm.SentencePieceProcessor,
    split_summaries: dict[str, dict],
) -> dict[str, Any]:
    """Returns the content of `summary.json` (its key order is the file's)."""
    return {
        "dataset": config.dataset,
        "source_lang": config.source_lang,
        "target_lang": config.target_lang,
        "vocab_size": processor.get_piece_size(),
        "fingerprint": fingerprint,
        "options": config.output_options(),
        "invalid_utf8_lines_replaced": sum(
            sum(split_summary["invalid_utf8_lines_replaced"].values())
            for split_summary in split_summaries.values()
        ),
        "files": {
            "sentencepiece_model": SENTENCEPIECE_PREFIX + ".model",
            "vocabulary": SENTENCEPIECE_PREFIX + ".vocab",
            **{
                split: [
                    os.path.basename(path)
                    for path in split_paths("", split, config.source_lang, config.target_lang)
                ]
                for split in split_summaries
            },
            "lengths_index": {split: index_file_name(split) for split in split_summaries},
        },
        "splits": split_summaries,
    }
