"""Data preparation: corpus -> cleaned text -> joint BPE model -> summary, in a data directory.

Layout of `data_dir` after `prepare_data`:

- `{split}.{lang}`: the prepared text of each split and side, UTF-8, one sentence per
  line. Training pairs are cleaned (`cleaning`); validation and test pairs only have their
  whitespace normalised (nothing is dropped, so BLEU covers the whole set).
- `sentencepiece.model`, `sentencepiece.vocab`: the joint BPE model and its vocabulary.
- `summary.json`: pairs kept and dropped per rule, token counts, length percentiles.
- `fingerprint.json`: what the outputs were made from; a re-run with the same inputs and
  options finds it and does nothing.
- `tfds/`: the tfds data directory (prepared Multi30k), unless another one is given.
"""

import dataclasses
import json
import os
from collections.abc import Callable, Mapping
from typing import Any

import sentencepiece as spm
from absl import logging

from convs2s_tf.data import bpe, statistics
from convs2s_tf.data.cleaning import CleaningConfig, CleaningReport, clean_pairs, normalize_pairs
from convs2s_tf.data.fingerprint import compute_fingerprint, read_fingerprint, write_fingerprint
from convs2s_tf.data.sources import make_source
from convs2s_tf.data.text_files import LineDecoder

# Bump when the prepared files change meaning, so existing data directories are redone.
FORMAT_VERSION = 1

SUMMARY_FILE = "summary.json"
FINGERPRINT_FILE = "fingerprint.json"
SENTENCEPIECE_PREFIX = "sentencepiece"
TFDS_SUBDIR = "tfds"


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
        bpe_max_sentences: train BPE on a seeded sample of this many sentences (0: all).
        seed: seed of that sample.
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
    bpe_max_sentences: int = 0
    seed: int = 1

    @property
    def resolved_tfds_data_dir(self) -> str:
        return self.tfds_data_dir or os.path.join(self.data_dir, TFDS_SUBDIR)

    def output_options(self) -> dict[str, Any]:
        """Returns the options the outputs depend on (not where anything is stored)."""
        return {
            "dataset": self.dataset,
            "source_lang": self.source_lang,
            "target_lang": self.target_lang,
            "vocab_size": self.vocab_size,
            "cleaning": dataclasses.asdict(self.cleaning),
            "invalid_utf8": self.invalid_utf8,
            "bpe_character_coverage": self.bpe_character_coverage,
            "bpe_max_sentences": self.bpe_max_sentences,
            "seed": self.seed if self.bpe_max_sentences else None,
        }


@dataclasses.dataclass(frozen=True)
class PreparedData:
    """A prepared data directory: paths of its files and its summary.

    Load one with `PreparedData.load(data_dir)` (after `prepare_data`).
    """

    data_dir: str
    source_lang: str
    target_lang: str
    splits: tuple[str, ...]
    summary: dict[str, Any]

    @classmethod
    def load(cls, data_dir: str) -> "PreparedData":
        """Reads `data_dir/summary.json`; raises FileNotFoundError if not prepared."""
        summary_path = os.path.join(data_dir, SUMMARY_FILE)
        if not os.path.isfile(summary_path):
            raise FileNotFoundError(
                f"{summary_path} not found: prepare the data first, e.g. "
                f"python -m pipelines.prepare_data --flagfile=... --data_dir={data_dir}"
            )
        with open(summary_path, encoding="utf-8") as file:
            summary = json.load(file)
        return cls(
            data_dir=data_dir,
            source_lang=summary["source_lang"],
            target_lang=summary["target_lang"],
            splits=tuple(summary["splits"]),
            summary=summary,
        )

    @property
    def sentencepiece_model_path(self) -> str:
        return os.path.join(self.data_dir, SENTENCEPIECE_PREFIX + ".model")

    @property
    def vocabulary_path(self) -> str:
        return os.path.join(self.data_dir, SENTENCEPIECE_PREFIX + ".vocab")

    def split_paths(self, split: str) -> tuple[str, str]:
        """Returns the (source, target) text files of `split`."""
        if split not in self.splits:
            raise ValueError(f"Split {split!r} was not prepared; prepared: {self.splits}.")
        return split_paths(self.data_dir, split, self.source_lang, self.target_lang)


def split_paths(data_dir: str, split: str, source_lang: str, target_lang: str) -> tuple[str, str]:
    """Returns the prepared (source, target) text file paths of `split` in `data_dir`."""
    return (
        os.path.join(data_dir, f"{split}.{source_lang}"),
        os.path.join(data_dir, f"{split}.{target_lang}"),
    )


@dataclasses.dataclass(frozen=True)
class PrepareResult:
    """Outcome of `prepare_data`: the summary, and whether existing outputs were reused."""

    summary: dict[str, Any]
    reused: bool
    data: PreparedData


def _write_split(pairs, source_path: str, target_path: str) -> None:
    """Writes pairs to two files via temporary names, renamed once complete."""
    with (
        open(source_path + ".tmp", "w", encoding="utf-8", newline="\n") as source_file,
        open(target_path + ".tmp", "w", encoding="utf-8", newline="\n") as target_file,
    ):
        for source, target in pairs:
            source_file.write(source + "\n")
            target_file.write(target + "\n")
    os.replace(source_path + ".tmp", source_path)
    os.replace(target_path + ".tmp", target_path)


def _outputs_exist(data_dir: str, splits: list[str], source_lang: str, target_lang: str) -> bool:
    paths = [os.path.join(data_dir, name) for name in (SUMMARY_FILE,)]
    paths += [os.path.join(data_dir, SENTENCEPIECE_PREFIX + ext) for ext in (".model", ".vocab")]
    for split in splits:
        paths += split_paths(data_dir, split, source_lang, target_lang)
    return all(os.path.isfile(path) for path in paths)


def prepare_data(
    config: PrepareConfig,
    *,
    force: bool = False,
    host_checker: Callable[[str], bool] | None = None,
) -> PrepareResult:
    """Prepares `config.data_dir` (see the module docstring), unless it is up to date.

    Args:
        config: what to prepare.
        force: prepare even if the fingerprint matches.
        host_checker: see `sources.TfdsSource` (tests pass a stub).

    Returns:
        The summary (also in `summary.json`) and whether the outputs were reused.

    Raises:
        CorpusFileNotFoundError, LineCountMismatchError, InvalidUtf8Error,
        DatasetUnavailableError: see `convs2s_tf.data.errors`.
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
    identity = {
        "format_version": FORMAT_VERSION,
        "sentencepiece_version": spm.__version__,
        "options": config.output_options(),
        "inputs": source.describe(),
        "splits": list(source.splits),
    }
    fingerprint = compute_fingerprint(identity)
    fingerprint_path = os.path.join(config.data_dir, FINGERPRINT_FILE)
    splits = list(source.splits)
    if (
        not force
        and read_fingerprint(fingerprint_path) == fingerprint
        and _outputs_exist(config.data_dir, splits, config.source_lang, config.target_lang)
    ):
        logging.info(
            "%s is up to date (fingerprint %s); nothing to do.", config.data_dir, fingerprint[:12]
        )
        data = PreparedData.load(config.data_dir)
        return PrepareResult(summary=data.summary, reused=True, data=data)

    # From here on the directory is in flux: drop the fingerprint so that an interrupted
    # run is redone next time instead of being taken as complete.
    if os.path.exists(fingerprint_path):
        os.remove(fingerprint_path)
    source.check()

    split_summaries = {}
    for split in splits:
        source_path, target_path = split_paths(
            config.data_dir, split, config.source_lang, config.target_lang
        )
        logging.info("Reading the %s split of %s", split, config.dataset)
        decoder = LineDecoder(config.invalid_utf8)
        report = CleaningReport()
        pairs = source.read_split(split, decoder)
        if split == "train":
            kept = clean_pairs(pairs, config.cleaning, report)
        else:
            # Evaluation sets are kept whole: BLEU must cover every reference.
            kept = normalize_pairs(pairs, report)
        _write_split(kept, source_path, target_path)
        split_summaries[split] = report.as_dict()
        split_summaries[split]["invalid_utf8_lines_replaced"] = dict(decoder.replaced_lines)
        logging.info("%s: %s", split, split_summaries[split])

    train_source, train_target = split_paths(
        config.data_dir, "train", config.source_lang, config.target_lang
    )
    logging.info("Training a %d-piece joint BPE model", config.vocab_size)
    model_path, _ = bpe.train_bpe(
        [train_source, train_target],
        os.path.join(config.data_dir, SENTENCEPIECE_PREFIX),
        config.vocab_size,
        character_coverage=config.bpe_character_coverage,
        max_sentences=config.bpe_max_sentences,
        seed=config.seed,
    )
    processor = spm.SentencePieceProcessor(model_file=model_path)
    bpe.check_special_ids(processor)

    for split in splits:
        source_path, target_path = split_paths(
            config.data_dir, split, config.source_lang, config.target_lang
        )
        split_summaries[split]["source"] = statistics.side_statistics(processor, source_path)
        split_summaries[split]["target"] = statistics.side_statistics(processor, target_path)

    summary = {
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
                for split in splits
            },
        },
        "splits": split_summaries,
    }
    summary_path = os.path.join(config.data_dir, SUMMARY_FILE)
    with open(summary_path + ".tmp", "w", encoding="utf-8") as file:
        json.dump(summary, file, indent=2, ensure_ascii=False)
        file.write("\n")
    os.replace(summary_path + ".tmp", summary_path)
    write_fingerprint(fingerprint_path, fingerprint, identity)
    return PrepareResult(summary=summary, reused=False, data=PreparedData.load(config.data_dir))
