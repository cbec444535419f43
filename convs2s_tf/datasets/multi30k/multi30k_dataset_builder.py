"""tfds builder for Multi30k (task 1), built offline from the gzipped text in `raw/`.

The description and citation come from README.md and CITATIONS.bib next to this module
(tfds's `dataset_info_from_configs` reads them).
"""

import gzip
import importlib.resources
import os
from collections.abc import Iterator
from typing import Any

import tensorflow_datasets as tfds

LANGUAGES = ("en", "de", "fr")

# tfds split name -> stem of the raw files (`raw/{stem}.{lang}.gz`).
SPLIT_FILE_STEMS = {
    "train": "train",
    "validation": "val",
    "test": "test_2016_flickr",
}


def raw_dir() -> str:
    """Returns the directory holding the embedded `{stem}.{lang}.gz` files."""
    return str(importlib.resources.files(__package__).joinpath("raw"))


def raw_path(split: str, language: str) -> str:
    """Returns the path of the embedded raw file of `split` in `language`."""
    return os.path.join(raw_dir(), f"{SPLIT_FILE_STEMS[split]}.{language}.gz")


def read_lines(path: str) -> list[str]:
    """Reads a gzipped UTF-8 file into lines (split on '\\n' only, like tf.data).

    Raises:
        ValueError: naming the file and line number of the first invalid UTF-8 line.
    """
    with gzip.open(path, "rb") as raw_file:
        data = raw_file.read()
    # str.splitlines would also split on U+2028, U+0085, ... and misalign the two sides.
    raw_lines = data.split(b"\n")
    if raw_lines and raw_lines[-1] == b"":
        raw_lines.pop()
    lines = []
    for line_number, raw_line in enumerate(raw_lines, start=1):
        try:
            lines.append(raw_line.rstrip(b"\r").decode("utf-8"))
        except UnicodeDecodeError as error:
            raise ValueError(
                f"{path}, line {line_number}: invalid UTF-8 ({error.reason})."
            ) from error
    return lines


class Multi30kConfig(tfds.core.BuilderConfig):
    """A Multi30k language pair; its order sets the `as_supervised` direction."""

    def __init__(self, *, source_language: str, target_language: str, **kwargs: Any) -> None:
        super().__init__(
            name=f"{source_language}-{target_language}",
            description=f"Multi30k {source_language} -> {target_language}.",
            **kwargs,
        )
        self.source_language = source_language
        self.target_language = target_language


class Builder(tfds.core.GeneratorBasedBuilder):
    """Multi30k (task 1) translation pairs from the text embedded in this package."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "Initial release: task 1 raw text, test set test_2016_flickr."}
    BUILDER_CONFIGS = [
        Multi30kConfig(source_language="en", target_language="de"),
        Multi30kConfig(source_language="de", target_language="en"),
        Multi30kConfig(source_language="en", target_language="fr"),
        Multi30kConfig(source_language="fr", target_language="en"),
    ]

    def _info(self) -> tfds.core.DatasetInfo:
        source, target = self.builder_config.source_language, self.builder_config.target_language
        return self.dataset_info_from_configs(
            features=tfds.features.Translation(languages=(source, target)),
            supervised_keys=(source, target),
            homepage="https://github.com/multi30k/dataset",
            # Keep the corpus order (tfds would otherwise shuffle examples by key), so that
            # validation and test sets read in their published order.
            disable_shuffling=True,
        )

    def _split_generators(
        self, dl_manager: tfds.download.DownloadManager
    ) -> dict[str, Iterator[tuple[int, dict[str, str]]]]:
        del dl_manager  # Everything is embedded: nothing to download.
        return {split: self._generate_examples(split) for split in SPLIT_FILE_STEMS}

    def _generate_examples(self, split: str) -> Iterator[tuple[int, dict[str, str]]]:
        languages = (self.builder_config.source_language, self.builder_config.target_language)
        sides = {language: read_lines(raw_path(split, language)) for language in languages}
        counts = {language: len(lines) for language, lines in sides.items()}
        if len(set(counts.values())) != 1:
            raise ValueError(
                f"Multi30k {split}: line counts differ: "
                + ", ".join(f"{raw_path(split, lang)} has {n}" for lang, n in counts.items())
            )
        for index in range(counts[languages[0]]):
            yield index, {language: sides[language][index] for language in languages}
