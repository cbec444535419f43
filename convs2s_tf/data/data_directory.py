"""What a prepared data directory holds: its file names, reading it, writing its files.

A data directory (written by `prepare.prepare_data`) holds `fingerprint.json`, naming
its current version folder `prepared-<FINGERPRINT[:16]>/` (published whole, see
`publication`), the `tfds/` data directory, and the preparation lock while one runs.
A version folder holds:

- `{split}.{lang}`: the prepared text of each split and side, UTF-8, one sentence per
  line. Training pairs are cleaned (`cleaning`); validation and test pairs only have their
  whitespace normalised (nothing is dropped, so BLEU covers the whole set).
- `{split}-NNNNN-of-MMMMM.tfrecord`: the same pairs tokenised, one `tf.train.Example`
  each (`records`); training pairs globally shuffled over many shards, each evaluation
  split in one shard, in order, with its text.
- `{split}.lengths.npz`: each split's lengths index (`length_index`): pairs per shard and
  length, which the training pipeline batches and counts from, and each shard's size
  and SHA-256, which a run checks the shards against (`shard_check`).
- `sentencepiece.model`, `sentencepiece.vocab`: the joint BPE model and its vocabulary.
- `summary.json`: pairs kept and dropped per rule, token counts, length percentiles.
- `fingerprint.json`: what the outputs were made from; a re-run with the same inputs and
  options finds it and does nothing.

`PreparedData.load` takes the data directory or a version folder (or a copy of one).
"""

import dataclasses
import json
import os
from collections.abc import Iterable
from typing import Any

from convs2s_tf.data import publication
from convs2s_tf.data.errors import CorruptShardError
from convs2s_tf.data.length_index import LengthIndex, index_file_name
from convs2s_tf.data.shard_check import check_shards, reprepare_command

SUMMARY_FILE = "summary.json"
FINGERPRINT_FILE = "fingerprint.json"
SENTENCEPIECE_PREFIX = "sentencepiece"
TFDS_SUBDIR = "tfds"


@dataclasses.dataclass(frozen=True)
class PreparedData:
    """A prepared data directory: paths of its files and its summary.

    Load one with `PreparedData.load(data_dir)` (after `prepare_data`); its `data_dir`
    is then the version folder holding the files.
    """

    data_dir: str
    source_lang: str
    target_lang: str
    splits: tuple[str, ...]
    summary: dict[str, Any]

    @classmethod
    def load(cls, data_dir: str) -> "PreparedData":
        """Reads the summary of `data_dir`'s current version (or of the version folder
        `data_dir`); raises FileNotFoundError if not prepared."""
        folder = publication.resolve(data_dir, FINGERPRINT_FILE)
        summary = read_summary(folder)
        return cls(
            data_dir=folder,
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

    def length_index(self, split: str) -> LengthIndex:
        """Returns `split`'s lengths index (its shards and their pairs' lengths).

        Raises:
            FileNotFoundError: the split's lengths index is missing (not prepared).
            CorruptShardError: its pairs are not the summary's.
        """
        self._check_split(split)
        path = os.path.join(self.data_dir, index_file_name(split))
        index = LengthIndex.load(path)
        pairs = self.summary["splits"][split].get("pairs_kept", index.pairs)
        if index.pairs != pairs:
            raise CorruptShardError(
                f"Lengths index {path} counts {index.pairs} pairs, the summary {pairs}; "
                f"prepare the data again: {reprepare_command(path)}."
            )
        return index

    def shard_paths(self, split: str) -> list[str]:
        """Returns the paths of `split`'s TFRecord shards, in shard order."""
        return [os.path.join(self.data_dir, name) for name in self.length_index(split).files]

    def _check_split(self, split: str) -> None:
        if split not in self.splits:
            raise ValueError(f"Split {split!r} was not prepared; prepared: {self.splits}.")

    def split_paths(self, split: str) -> tuple[str, str]:
        """Returns the (source, target) text files of `split`."""
        self._check_split(split)
        return split_paths(self.data_dir, split, self.source_lang, self.target_lang)


def split_paths(data_dir: str, split: str, source_lang: str, target_lang: str) -> tuple[str, str]:
    """Returns the prepared (source, target) text file paths of `split` in `data_dir`."""
    return (
        os.path.join(data_dir, f"{split}.{source_lang}"),
        os.path.join(data_dir, f"{split}.{target_lang}"),
    )


def read_summary(data_dir: str) -> dict[str, Any]:
    """Returns `data_dir/summary.json`; raises FileNotFoundError if not prepared."""
    summary_path = os.path.join(data_dir, SUMMARY_FILE)
    if not os.path.isfile(summary_path):
        raise FileNotFoundError(
            f"{summary_path} not found: prepare the data first (`prepare_data`, or "
            f"python -m pipelines.prepare_data with `data_dir={data_dir}`)."
        )
    with open(summary_path, encoding="utf-8") as file:
        return json.load(file)


def outputs_exist(data_dir: str, splits: list[str], source_lang: str, target_lang: str) -> bool:
    """Returns whether `data_dir` holds the summary, the BPE model, every split's text,
    every split's lengths index and the shards it lists, of the sizes it lists."""
    paths = [os.path.join(data_dir, name) for name in (SUMMARY_FILE,)]
    paths += [os.path.join(data_dir, SENTENCEPIECE_PREFIX + ext) for ext in (".model", ".vocab")]
    for split in splits:
        paths += split_paths(data_dir, split, source_lang, target_lang)
    if not all(os.path.isfile(path) for path in paths):
        return False
    for split in splits:
        try:
            index = LengthIndex.load(os.path.join(data_dir, index_file_name(split)))
            paths = [os.path.join(data_dir, name) for name in index.files]
            check_shards(paths, index, checksum_limit_bytes=0)
        except (OSError, ValueError, KeyError):  # CorruptShardError is a ValueError.
            return False
    return True


def write_split(pairs: Iterable[tuple[str, str]], source_path: str, target_path: str) -> None:
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


def write_summary(data_dir: str, summary: dict[str, Any]) -> None:
    """Writes `summary.json` via a temporary name, renamed once complete."""
    summary_path = os.path.join(data_dir, SUMMARY_FILE)
    with open(summary_path + ".tmp", "w", encoding="utf-8") as file:
        json.dump(summary, file, indent=2, ensure_ascii=False)
        file.write("\n")
    os.replace(summary_path + ".tmp", summary_path)
