"""Where parallel text comes from: the embedded Multi30k, local files, or the tfds catalog.

Every source yields aligned (source, target) sentence pairs per split ("train",
"validation", "test") and describes its inputs for the preparation fingerprint (so that
re-preparing is a no-op unless the inputs changed).

- `multi30k`: the corpus embedded in `convs2s_tf.datasets.multi30k`, read through its tfds
  builder (prepared offline into a tfds data directory).
- `local`: `PREFIX.SRC` / `PREFIX.TGT` text files (plain or gzip) per split.
- a tfds catalog name such as `wmt14_translate/de-en`: read with tfds if already prepared
  in the tfds data directory; otherwise downloaded, but only after a quick reachability
  check of the download hosts, so that an offline machine fails in seconds (tfds itself
  retries for minutes) with a message on how to use local files instead.
"""

import abc
import hashlib
import socket
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from urllib.parse import urlparse

from absl import logging

from convs2s_tf.data.errors import (
    CorpusFileNotFoundError,
    DatasetUnavailableError,
    LineCountMismatchError,
)
from convs2s_tf.data.text_files import (
    LineDecoder,
    iter_raw_lines,
    read_parallel_lines,
    resolve_corpus_file,
)

SPLITS = ("train", "validation", "test")

MULTI30K = "multi30k"
LOCAL = "local"
# The paper's WMT setups (section 4.1), by tfds catalog name.
WMT_DATASETS = ("wmt14_translate/de-en", "wmt14_translate/fr-en", "wmt16_translate/ro-en")

# Hosts tried when the download hosts of a catalog dataset cannot be worked out.
_DEFAULT_DOWNLOAD_HOSTS = ("www.statmt.org",)
_REACHABILITY_TIMEOUT_SECONDS = 3.0

Pair = tuple[str, str]


def file_sha256(path: str) -> str:
    """Returns the SHA-256 of a file's bytes (as stored, i.e. compressed if gzip)."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while block := file.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


class ParallelSource(abc.ABC):
    """A parallel corpus with train/validation/test splits.

    Attributes:
        source_lang: language code of the source side, e.g. "en".
        target_lang: language code of the target side, e.g. "de".
    """

    def __init__(self, source_lang: str, target_lang: str):
        if source_lang == target_lang:
            raise ValueError(f"source_lang and target_lang are both {source_lang!r}.")
        self.source_lang = source_lang
        self.target_lang = target_lang

    @property
    @abc.abstractmethod
    def splits(self) -> tuple[str, ...]:
        """The names of the corpus' splits."""

    @abc.abstractmethod
    def describe(self) -> dict[str, Any]:
        """Returns a JSON-able identity of the inputs (names, versions, content hashes)."""

    def check(self) -> None:
        """Fails early (before any work) if the corpus cannot be read. Default: no check."""

    @abc.abstractmethod
    def read_split(self, split: str, decoder: LineDecoder) -> Iterator[Pair]:
        """Yields the (source, target) pairs of `split`, decoding bytes with `decoder`."""


class LocalFilesSource(ParallelSource):
    """`PREFIX.SRC` / `PREFIX.TGT` files per split, plain or gzip (`PREFIX.SRC.gz`)."""

    def __init__(self, split_prefixes: dict[str, str], source_lang: str, target_lang: str):
        """Initialises the source.

        Args:
            split_prefixes: split name -> file prefix, e.g. {"train": "/corpus/train"} for
                /corpus/train.en and /corpus/train.de. "train" is required.
            source_lang: source language code (file suffix).
            target_lang: target language code (file suffix).
        """
        super().__init__(source_lang, target_lang)
        unknown = set(split_prefixes) - set(SPLITS)
        if unknown:
            raise ValueError(f"Unknown split(s) {sorted(unknown)}; expected {SPLITS}.")
        if not split_prefixes.get("train"):
            raise ValueError(
                'A local corpus needs a training prefix (`train_prefix`: the "train" entry '
                "of `split_prefixes`)."
            )
        self.split_prefixes = {split: prefix for split, prefix in split_prefixes.items() if prefix}

    def split_paths(self, split: str) -> tuple[str, str]:
        """Returns the existing (source, target) files of `split`; raises naming a missing one."""
        prefix = self.split_prefixes[split]
        return (
            resolve_corpus_file(prefix, self.source_lang),
            resolve_corpus_file(prefix, self.target_lang),
        )

    @property
    def splits(self) -> tuple[str, ...]:
        return tuple(split for split in SPLITS if split in self.split_prefixes)

    def check(self) -> None:
        """Checks that every file exists and both sides of each split have as many lines."""
        for split in self.splits:
            source_path, target_path = self.split_paths(split)
            source_count = sum(1 for _ in iter_raw_lines(source_path))
            target_count = sum(1 for _ in iter_raw_lines(target_path))
            if source_count != target_count:
                raise LineCountMismatchError(
                    f"Line counts differ: {source_path} has {source_count} lines, "
                    f"{target_path} has {target_count} lines."
                )

    def describe(self) -> dict[str, Any]:
        files = {}
        for split in self.splits:
            for path in self.split_paths(split):
                files[path] = file_sha256(path)
        return {"kind": LOCAL, "languages": [self.source_lang, self.target_lang], "files": files}

    def read_split(self, split: str, decoder: LineDecoder) -> Iterator[Pair]:
        yield from read_parallel_lines(*self.split_paths(split), decoder)


def host_is_reachable(host: str, port: int = 443, timeout: float = 3.0) -> bool:
    """Returns whether a TCP connection to `host:port` opens within `timeout` seconds."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _wmt_download_hosts(builder: Any) -> tuple[str, ...]:
    """Returns the hosts a tfds WMT builder downloads from (its subsets' URLs)."""
    try:
        from tensorflow_datasets.translate import wmt

        source, target = builder.builder_config.language_pair
        urls = []
        for subsets in builder.subsets.values():
            for subset_name in subsets:
                url = wmt.DATASET_MAP[subset_name].get_url(source if source != "en" else target)
                urls.extend(url if isinstance(url, list) else [url])
        hosts = sorted({host for url in urls if (host := urlparse(url).hostname)})
        return tuple(hosts) or _DEFAULT_DOWNLOAD_HOSTS
    except Exception:  # noqa: BLE001 - tfds internals vary; any failure means "use defaults".
        return _DEFAULT_DOWNLOAD_HOSTS


def _unavailable_message(name: str, tfds_data_dir: str, unreachable: Sequence[str]) -> str:
    source, _, target = name.partition("/")[2].partition("-")
    return (
        f"tfds dataset {name!r} is not prepared in {tfds_data_dir} and cannot be downloaded: "
        f"no connection to {', '.join(unreachable)}. Either\n"
        f"  - use local files: `dataset='local'` `source_lang=...` `target_lang=...` "
        f"`train_prefix=/path/train` `valid_prefix=/path/valid` `test_prefix=/path/test` "
        f"(a `PrepareConfig`'s `split_prefixes`; files /path/train.{source or 'SRC'} and "
        f"/path/train.{target or 'TGT'}, plain or .gz, one sentence per line, aligned), or\n"
        f"  - prepare it with tfds on a machine with network access (tfds build {name}) and "
        f"copy that tfds data directory here, passing it as `tfds_data_dir`."
    )


class TfdsSource(ParallelSource):
    """A translation dataset read through tfds (embedded Multi30k or a catalog name)."""

    def __init__(
        self,
        name: str,
        source_lang: str,
        target_lang: str,
        tfds_data_dir: str,
        host_checker: Callable[[str], bool] | None = None,
    ):
        """Initialises the source.

        Args:
            name: tfds name with config, e.g. "wmt14_translate/de-en" or "multi30k/en-de".
            source_lang: feature key of the source side.
            target_lang: feature key of the target side.
            tfds_data_dir: where tfds keeps (or will keep) the prepared dataset.
            host_checker: returns whether a download host is reachable; defaults to a TCP
                connect with a short timeout (tests inject a stub: no network).
        """
        super().__init__(source_lang, target_lang)
        import tensorflow_datasets as tfds

        if name.startswith(MULTI30K):
            import convs2s_tf.datasets.multi30k  # noqa: F401 - registers the builder.
        self.name = name
        self.tfds_data_dir = tfds_data_dir
        self._host_checker = host_checker or (
            lambda host: host_is_reachable(host, timeout=_REACHABILITY_TIMEOUT_SECONDS)
        )
        # Building a tfds builder reads local metadata only; no network.
        self.builder = tfds.builder(name, data_dir=tfds_data_dir)
        languages = tuple(getattr(self.builder.info.features, "languages", ()))
        for language in (source_lang, target_lang):
            if language not in languages:
                raise ValueError(
                    f"tfds dataset {name!r} has languages {languages}, not {language!r}."
                )

    @property
    def splits(self) -> tuple[str, ...]:
        return SPLITS

    def describe(self) -> dict[str, Any]:
        description: dict[str, Any] = {
            "kind": "tfds",
            "name": self.name,
            "version": str(self.builder.version),
            "languages": [self.source_lang, self.target_lang],
        }
        if self.name.startswith(MULTI30K):
            from convs2s_tf.datasets.multi30k import SPLIT_FILE_STEMS, raw_path

            # The embedded files are this dataset's only input: hash them so an edited
            # copy re-triggers preparation even without a version bump.
            description["files"] = {
                f"{split}.{lang}": file_sha256(raw_path(split, lang))
                for split in SPLIT_FILE_STEMS
                for lang in (self.source_lang, self.target_lang)
            }
        return description

    def check(self) -> None:
        """Prepares the dataset, failing fast if that needs a download that cannot work."""
        if self.builder.is_prepared():
            return
        if not self.name.startswith(MULTI30K):
            hosts = _wmt_download_hosts(self.builder)
            unreachable = [host for host in hosts if not self._host_checker(host)]
            if unreachable:
                raise DatasetUnavailableError(
                    _unavailable_message(self.name, self.tfds_data_dir, unreachable)
                )
        logging.info("Preparing tfds dataset %s in %s", self.name, self.tfds_data_dir)
        self.builder.download_and_prepare()

    def read_split(self, split: str, decoder: LineDecoder) -> Iterator[Pair]:
        import tensorflow_datasets as tfds

        self.check()
        dataset = self.builder.as_dataset(split=split, shuffle_files=False)
        origin = f"tfds {self.name} {split}"
        for index, example in enumerate(tfds.as_numpy(dataset), start=1):
            yield (
                decoder.decode(example[self.source_lang], f"{origin} {self.source_lang}", index),
                decoder.decode(example[self.target_lang], f"{origin} {self.target_lang}", index),
            )


def make_source(
    dataset: str,
    source_lang: str,
    target_lang: str,
    *,
    split_prefixes: dict[str, str] | None = None,
    tfds_data_dir: str,
    host_checker: Callable[[str], bool] | None = None,
) -> ParallelSource:
    """Returns the source named by `dataset`.

    Args:
        dataset: "multi30k", "local", or a tfds catalog name with its config, e.g.
            "wmt14_translate/de-en" (see `WMT_DATASETS` for the paper's setups).
        source_lang: source language code.
        target_lang: target language code.
        split_prefixes: for "local": split name -> file prefix.
        tfds_data_dir: tfds data directory for "multi30k" and catalog names.
        host_checker: see `TfdsSource`.
    """
    if dataset == LOCAL:
        return LocalFilesSource(split_prefixes or {}, source_lang, target_lang)
    if dataset == MULTI30K:
        from convs2s_tf.datasets.multi30k import Builder as Multi30kBuilder

        config = f"{source_lang}-{target_lang}"
        configs = [builder_config.name for builder_config in Multi30kBuilder.BUILDER_CONFIGS]
        if config not in configs:
            raise ValueError(f"Multi30k has language pairs {configs}, not {config!r}.")
        return TfdsSource(f"{MULTI30K}/{config}", source_lang, target_lang, tfds_data_dir)
    if "/" not in dataset:
        raise ValueError(
            f"Unknown dataset {dataset!r}: expected {MULTI30K!r}, {LOCAL!r} or a tfds name with "
            f"its config such as {', '.join(WMT_DATASETS)}."
        )
    return TfdsSource(dataset, source_lang, target_lang, tfds_data_dir, host_checker=host_checker)


__all__ = [
    "CorpusFileNotFoundError",
    "LOCAL",
    "LocalFilesSource",
    "MULTI30K",
    "ParallelSource",
    "SPLITS",
    "TfdsSource",
    "WMT_DATASETS",
    "file_sha256",
    "host_is_reachable",
    "make_source",
]
