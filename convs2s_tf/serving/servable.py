"""The model a server serves: one loaded SavedModel version, and the newest version under a
base path kept loaded as TF Serving's default ("latest") version policy keeps it."""

from __future__ import annotations

import os
import threading

import tensorflow as tf
from absl import logging
from tensorflow.core.protobuf import saved_model_pb2

from convs2s_tf.export.saved_model import latest_version_dir
from convs2s_tf.export.warmup import replay_warmup_requests


class ServableModel:
    """One SavedModel version, loaded for prediction.

    Like TF Serving with its default `--enable_model_warmup`, loading replays the
    version's warm-up requests (`assets.extra/tf_serving_warmup_requests`), so that no
    client request waits for a compiled bucket's XLA compilation.

    Args:
        name: The model name clients put in `ModelSpec.name`.
        base_path: The directory holding `<version>/` SavedModels; the newest is loaded
            unless `version_dir` names one.
        warmup_threads: Warm-up requests replayed at once (None: one per CPU core); 0
            replays none.
        version_dir: The version directory to load (default: the newest under
            `base_path`).

    Attributes:
        path: The loaded version's directory.
        version: Its number.
        warmup_seconds: How long the warm-up took (0.0 without one).
    """

    def __init__(
        self,
        name: str,
        base_path: str,
        warmup_threads: int | None = None,
        version_dir: str | None = None,
    ) -> None:
        import tensorflow_text  # noqa: F401 (registers the SentencePiece ops of the export)

        if warmup_threads is not None and warmup_threads < 0:
            raise ValueError(f"warmup_threads must be >= 0, got {warmup_threads}.")
        self.name = name
        self.path = version_dir or latest_version_dir(base_path)
        self.version = int(os.path.basename(self.path))
        self.loaded = tf.saved_model.load(self.path)
        self.warmup_seconds = (
            0.0
            if warmup_threads == 0
            else replay_warmup_requests(self.loaded, self.path, warmup_threads)
        )
        self.signatures = dict(self.loaded.signatures)
        proto = saved_model_pb2.SavedModel()
        with tf.io.gfile.GFile(os.path.join(self.path, "saved_model.pb"), "rb") as f:
            proto.ParseFromString(f.read())
        self.signature_defs = proto.meta_graphs[0].signature_def


class ServedVersions:
    """The newest version under a base path, as TF Serving's file-system source and
    "latest" policy serve it: `poll()` loads a newer version (warm-up included) beside the
    one serving, then makes it the one `current` returns; requests already holding the
    old version finish on it, and it is unloaded when the last lets go.

    A version that fails to load is logged and skipped (the old one keeps serving) until
    a newer one appears.

    Args:
        first: The version served from the start.
        base_path: The directory polled for `<version>/` SavedModels.
        warmup_threads: As `ServableModel`'s, for every version loaded.
    """

    def __init__(self, first: ServableModel, base_path: str, warmup_threads: int | None) -> None:
        self.name = first.name
        self.base_path = base_path
        self.warmup_threads = warmup_threads
        self._current = first
        self._failed_version = -1
        self._lock = threading.Lock()

    @property
    def current(self) -> ServableModel:
        """The version serving now."""
        with self._lock:
            return self._current

    def poll(self) -> bool:
        """Loads the newest version if it is newer than the one serving; whether it did."""
        try:
            newest = latest_version_dir(self.base_path)
        except (FileNotFoundError, tf.errors.OpError) as error:
            logging.warning("No version to poll under %s: %s", self.base_path, error)
            return False
        version = int(os.path.basename(newest))
        if version <= max(self.current.version, self._failed_version):
            return False
        logging.info("Loading %s version %d from %s", self.name, version, newest)
        try:
            loaded = ServableModel(self.name, self.base_path, self.warmup_threads, newest)
        except Exception as error:  # any failure to load keeps the old version serving
            logging.error(
                "Version %d of %s did not load; still serving %d: %s",
                version,
                self.name,
                self.current.version,
                error,
            )
            self._failed_version = version
            return False
        with self._lock:
            old, self._current = self._current, loaded
        logging.info("Serving %s version %d (was %d)", self.name, version, old.version)
        return True

    def poll_every(self, seconds: float, stop: threading.Event) -> threading.Thread:
        """Starts a daemon thread that polls every `seconds` until `stop` is set."""

        def run() -> None:
            while not stop.wait(seconds):
                self.poll()

        thread = threading.Thread(target=run, name="version-poller", daemon=True)
        thread.start()
        return thread
