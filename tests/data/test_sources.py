"""Corpus sources: local files (plain/gzip), their errors, and tfds catalog names offline."""

import socket
import time

import pytest
import tensorflow_datasets as tfds
from helpers.text_files import SPLITLINES_ONLY_BREAKS, write_bytes

from convs2s_tf.data.errors import (
    CorpusFileNotFoundError,
    DatasetUnavailableError,
    LineCountMismatchError,
)
from convs2s_tf.data.sources import (
    WMT_DATASETS,
    LocalFilesSource,
    TfdsSource,
    host_is_reachable,
    make_source,
)
from convs2s_tf.data.text_files import LineDecoder, read_parallel_lines


def test_local_files_plain_and_gzip_are_read_alike(tmp_path):
    text_en = "A dog .\nTwo men\u2028 talk .\r\nA cat\n".encode()
    text_de = "Ein Hund .\nZwei Männer reden .\nEine Katze".encode()  # no final newline
    write_bytes(tmp_path / "plain.en", text_en)
    write_bytes(tmp_path / "plain.de", text_de)
    write_bytes(tmp_path / "packed.en.gz", text_en, compress=True)
    write_bytes(tmp_path / "packed.de.gz", text_de, compress=True)
    read = {}
    for name in ("plain", "packed"):
        source = LocalFilesSource({"train": str(tmp_path / name)}, "en", "de")
        source.check()
        read[name] = list(source.read_split("train", LineDecoder()))
    # Only "\n" ends a line (U+2028 stays inside it, like tf.data and SentencePiece read it).
    assert read["plain"] == [
        ("A dog .", "Ein Hund ."),
        ("Two men\u2028 talk .", "Zwei Männer reden ."),
        ("A cat", "Eine Katze"),
    ]
    assert read["packed"] == read["plain"]


def test_missing_file_is_named(tmp_path):
    write_bytes(tmp_path / "train.en", b"a\n")
    source = LocalFilesSource({"train": str(tmp_path / "train")}, "en", "de")
    with pytest.raises(CorpusFileNotFoundError, match=f"{tmp_path}/train.de"):
        source.check()


def test_mismatched_line_counts_name_both_files_and_counts(tmp_path):
    source_path = write_bytes(tmp_path / "train.en", b"a\nb\nc\n")
    target_path = write_bytes(tmp_path / "train.de", b"x\ny\n", compress=False)
    source = LocalFilesSource({"train": str(tmp_path / "train")}, "en", "de")
    expected = f"{source_path} has 3 lines, {target_path} has 2 lines"
    with pytest.raises(LineCountMismatchError, match=expected):
        source.check()
    # Reading alone (without the up-front check) finds it too, at the end.
    with pytest.raises(LineCountMismatchError, match=expected):
        list(read_parallel_lines(source_path, target_path, LineDecoder()))
    with pytest.raises(LineCountMismatchError, match=f"{target_path} has 2 lines, "):
        list(read_parallel_lines(target_path, source_path, LineDecoder()))


@pytest.mark.parametrize("character", SPLITLINES_ONLY_BREAKS)
def test_local_corpus_keeps_the_line_count(tmp_path, character):
    # The character is on the source side only: a split there would misalign the pairs
    # (and fail the line-count check).
    (tmp_path / "train.en").write_bytes(f"A dog .\r\nTwo{character} men .\r\nA cat\r\n".encode())
    (tmp_path / "train.de").write_bytes("Ein Hund .\nZwei Männer .\nEine Katze\n".encode())
    source = LocalFilesSource({"train": str(tmp_path / "train")}, "en", "de")
    source.check()
    assert list(source.read_split("train", LineDecoder())) == [
        ("A dog .", "Ein Hund ."),
        (f"Two{character} men .", "Zwei Männer ."),
        ("A cat", "Eine Katze"),
    ]


def test_local_source_needs_a_training_prefix_and_known_splits():
    with pytest.raises(ValueError, match="train_prefix"):
        LocalFilesSource({"validation": "/x/valid"}, "en", "de")
    with pytest.raises(ValueError, match="Unknown split"):
        LocalFilesSource({"train": "/x/train", "dev": "/x/dev"}, "en", "de")


def test_closed_local_port_is_unreachable_quickly():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free_port = probe.getsockname()[1]
    start = time.monotonic()
    assert not host_is_reachable("127.0.0.1", free_port, timeout=2)
    assert time.monotonic() - start < 2


@pytest.mark.parametrize("name", WMT_DATASETS)
def test_wmt_catalog_names_fail_fast_offline_with_local_file_advice(
    name, tmp_path, monkeypatch, no_network
):
    def forbidden(*args, **kwargs):
        raise AssertionError("tfds download attempted")

    monkeypatch.setattr(tfds.core.DatasetBuilder, "download_and_prepare", forbidden)
    checked_hosts = []

    def offline(host):
        checked_hosts.append(host)
        return False

    start = time.monotonic()
    source = make_source(name, "en", name[-5:-3], tfds_data_dir=str(tmp_path), host_checker=offline)
    with pytest.raises(DatasetUnavailableError) as error:
        source.check()
    assert time.monotonic() - start < 10
    assert "statmt.org" in " ".join(checked_hosts)
    message = str(error.value)
    # The library names its parameters; the command line names them as flags (cli.py).
    assert name in message and "`dataset='local'`" in message and "`train_prefix=" in message
    assert "`tfds_data_dir`" in message and "--" not in message


def test_default_reachability_check_fails_fast_when_connections_fail(tmp_path, monkeypatch):
    attempts = []

    def offline(address, timeout=None, **kwargs):
        attempts.append((address, timeout))
        raise OSError("Network is unreachable")

    monkeypatch.setattr(socket, "create_connection", offline)
    source = TfdsSource("wmt16_translate/ro-en", "ro", "en", str(tmp_path))
    with pytest.raises(DatasetUnavailableError, match="`dataset='local'`"):
        source.check()
    assert attempts and all(timeout <= 5 for _, timeout in attempts)


def test_tfds_sources_check_languages_and_names(tmp_path, no_network):
    with pytest.raises(ValueError, match="'fr'"):
        make_source("wmt14_translate/de-en", "fr", "en", tfds_data_dir=str(tmp_path))
    with pytest.raises(ValueError, match="Multi30k has language pairs"):
        make_source("multi30k", "de", "fr", tfds_data_dir=str(tmp_path))
    with pytest.raises(ValueError, match="Unknown dataset"):
        make_source("wmt14", "de", "en", tfds_data_dir=str(tmp_path))
