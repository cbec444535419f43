"""Tests of export versions: claimed atomically, flushed before they appear, and served
under a name `models.config` holds escaped.

Versions are written with small files in place of SavedModels: claiming a version does
not depend on what the directory holds, and a real export (tests/test_export.py) takes
seconds. The exports race in threads of one process: a rename is one system call either
way.
"""

import os
import threading
import uuid

import pytest
import tensorflow as tf
from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from convs2s_tf.export import saved_model
from convs2s_tf.export.saved_model import (
    MODEL_CONFIG_FILE,
    claim_version,
    latest_version_dir,
    write_next_version,
    write_server_configs,
)

SERVER_CONFIGS = ["batching_parameters.txt", MODEL_CONFIG_FILE]
FILES = ("saved_model.pb", "variables/variables.index", "variables/variables.data-00000-of-00001")


def write_files(directory, writer, files=FILES):
    """Fills `directory` as a SavedModel of `writer` (each file names it)."""
    for name in files:
        path = os.path.join(directory, name)
        tf.io.gfile.makedirs(os.path.dirname(path))
        with tf.io.gfile.GFile(path, "w") as f:
            f.write(writer)


def writers_of(version_dir):
    """The writers named by the files of a version (one, if it is not mixed)."""
    writers = set()
    for name in FILES:
        with tf.io.gfile.GFile(os.path.join(version_dir, name)) as f:
            writers.add(f.read())
    return writers


def test_an_export_started_meanwhile_leaves_a_half_written_one_alone(tmp_path):
    base = str(tmp_path / "base")
    first_half_written, second_done = threading.Event(), threading.Event()
    results = {}

    def slow_write(directory):
        write_files(directory, "slow", FILES[:1])
        first_half_written.set()
        assert second_done.wait(30)
        write_files(directory, "slow", FILES[1:])

    def slow_export():
        results["slow"] = write_next_version(base, slow_write)

    thread = threading.Thread(target=slow_export)
    thread.start()
    assert first_half_written.wait(30)
    # Both exports see no version yet: they would pick the same number.
    results["fast"] = write_next_version(base, lambda directory: write_files(directory, "fast"))
    second_done.set()
    thread.join(30)
    assert results == {"fast": os.path.join(base, "1"), "slow": os.path.join(base, "2")}
    assert writers_of(results["fast"]) == {"fast"} and writers_of(results["slow"]) == {"slow"}
    assert sorted(os.listdir(base)) == ["1", "2"] + SERVER_CONFIGS


def test_concurrent_exports_get_distinct_complete_versions(tmp_path):
    base = str(tmp_path / "base")
    count = 8
    # All finish writing at once, so that they claim their versions at the same time.
    all_written = threading.Barrier(count)
    versions, errors = {}, []

    def export(writer):
        def write(directory):
            write_files(directory, writer)
            all_written.wait(30)

        try:
            versions[writer] = write_next_version(base, write, model_name="racing")
        except Exception as error:  # reported by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=export, args=(f"writer {i}",)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert sorted(versions.values()) == sorted(os.path.join(base, str(v)) for v in range(1, 9))
    for writer, version_dir in versions.items():
        assert writers_of(version_dir) == {writer}
    assert sorted(os.listdir(base)) == sorted(map(str, range(1, 9))) + SERVER_CONFIGS


def test_a_stale_listing_takes_the_next_free_number(tmp_path, monkeypatch):
    base = tmp_path / "base"
    first, second = base / ".tmp-first", base / ".tmp-second"
    write_files(str(first), "first")
    write_files(str(second), "second")
    assert claim_version(str(base), str(first)) == str(base / "1")
    # As a racer sees the base: listed before the first claim.
    monkeypatch.setattr(saved_model, "next_version", lambda export_dir: 1)
    assert claim_version(str(base), str(second)) == str(base / "2")
    assert writers_of(str(base / "1")) == {"first"} and writers_of(str(base / "2")) == {"second"}


def test_files_are_flushed_before_the_version_appears(tmp_path, monkeypatch):
    base = str(tmp_path / "base")
    events = []
    real_fsync, real_rename = os.fsync, os.rename

    def fsync(descriptor):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{descriptor}")))
        real_fsync(descriptor)

    def rename(source, target):
        events.append(("rename", str(target)))
        real_rename(source, target)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "rename", rename)
    staged = []

    def write(directory):
        write_files(directory, "flushed")
        staged.append(directory)

    version_dir = write_next_version(base, write)
    renamed_at = events.index(("rename", version_dir))
    flushed_before = {path for kind, path in events[:renamed_at] if kind == "fsync"}
    staging = staged[0]
    expected = {os.path.join(staging, name) for name in FILES}
    expected |= {staging, os.path.join(staging, "variables")}
    assert expected <= flushed_before
    # The base directory, after the rename: the new entry itself is durable.
    assert ("fsync", base) in events[renamed_at:]


def test_a_failed_export_leaves_nothing(tmp_path):
    base = tmp_path / "base"

    def fail(directory):
        write_files(directory, "failed", FILES[:1])
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError, match="interrupted"):
        write_next_version(str(base), fail)
    assert os.listdir(base) == []
    with pytest.raises(ValueError, match="wrote nothing"):
        write_next_version(str(base), os.makedirs)
    assert os.listdir(base) == []


@pytest.mark.parametrize(
    "name",
    ['say "hi"', "back\\slash", "my model", "modèle", 'x" } config { name "injected'],
)
def test_models_config_holds_the_name_escaped(tmp_path, name):
    write_server_configs(str(tmp_path), name)
    config = text_format.Parse(
        (tmp_path / MODEL_CONFIG_FILE).read_text(encoding="utf-8"),
        model_server_config_pb2.ModelServerConfig(),
    )
    (model,) = config.model_config_list.config
    assert (model.name, model.base_path, model.model_platform) == (
        name,
        f"/models/{name}",
        "tensorflow",
    )
    assert sorted(os.listdir(tmp_path)) == SERVER_CONFIGS  # no temporary file left


@pytest.mark.parametrize("name", ["", "..", "a/b", "a:b", "two\nlines", "nul\x00"])
def test_a_name_tf_serving_cannot_serve_is_refused_before_the_export(tmp_path, name):
    written = []
    with pytest.raises(ValueError, match="cannot be served by TF Serving") as error:
        write_next_version(str(tmp_path / "base"), written.append, model_name=name or ".")
    assert "\n" not in str(error.value).replace(repr(name), "")
    assert written == []


def test_on_an_object_store_files_are_copied_with_saved_model_pb_last(monkeypatch):
    # ram:// is TensorFlow's in-memory file system; like gs:// it is no local path.
    base = f"ram://exports-{uuid.uuid4().hex}/base"
    copied = []
    real_copy = tf.io.gfile.copy

    def copy(source, target, overwrite=False):
        copied.append(os.path.relpath(target, base))
        real_copy(source, target, overwrite)

    monkeypatch.setattr(tf.io.gfile, "copy", copy)
    write_next_version(base, lambda directory: write_files(directory, "first"))
    version_dir = write_next_version(base, lambda directory: write_files(directory, "second"))
    assert version_dir == f"{base}/2"
    assert copied[len(FILES) - 1] == "1/saved_model.pb" and copied[-1] == "2/saved_model.pb"
    assert latest_version_dir(base) == version_dir and writers_of(version_dir) == {"second"}
    assert sorted(tf.io.gfile.listdir(base)) == ["1", "2"] + SERVER_CONFIGS
