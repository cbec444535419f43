"""Publishing prepared data atomically: built under a unique name, renamed into place.

A preparer writes everything into its own folder, `DATA_DIR/.tmp-<TOKEN>/` (its lock
token, see `preparation_lock`), flushes it
to disk, then renames it to the version folder of its fingerprint,
`DATA_DIR/prepared-<FINGERPRINT[:16]>/`, and points `DATA_DIR/fingerprint.json` at it.
No two preparers ever write one file, and a version folder is complete from the moment
its name exists, so readers see a whole preparation or none.

Renaming a folder onto a non-empty one fails: when two preparers of one fingerprint
race (the lock is only there to avoid the duplicate work, see `preparation_lock`), the
first rename wins and the second discards its own folder. A preparer replacing a
broken or forced version moves that one aside first, and only if it is still the one
it saw when it started: a version published meanwhile by another preparer wins. A
folder is removed by renaming it to `DATA_DIR/.trash-<UUID>` first, so a removal never
runs inside a folder that another process has just renamed into place.

Unfinished folders of preparers that died (or were paused and taken over) are removed
by the next lock holder (a folder not named by the lock's token belongs to a preparer
without the lock), and older versions once a new one is published.
"""

import json
import os
import shutil
import uuid

from absl import logging

from convs2s_tf.data.fingerprint import read_fingerprint_fields

VERSION_PREFIX = "prepared-"
TEMPORARY_PREFIX = ".tmp-"
TRASH_PREFIX = ".trash-"
# The key of a version's fingerprint.json naming its publication (its temporary name),
# and the key of the data directory's fingerprint.json naming the current version.
PUBLICATION_KEY = "publication"
VERSION_KEY = "prepared"


def version_name(fingerprint: str) -> str:
    """Returns the version folder name of the data prepared with `fingerprint`."""
    return VERSION_PREFIX + fingerprint[:16]


def new_temporary_folder(data_dir: str, token: str) -> str:
    """Creates and returns a folder no other preparer writes: `.tmp-<TOKEN>`, TOKEN
    unique to this preparer (its lock token)."""
    path = os.path.join(data_dir, TEMPORARY_PREFIX + token)
    os.makedirs(path)
    return path


def publication_id(folder: str, fingerprint_file: str) -> str | None:
    """Returns the publication id in `folder`'s fingerprint file (None if absent)."""
    fields = read_fingerprint_fields(os.path.join(folder, fingerprint_file))
    value = (fields or {}).get(PUBLICATION_KEY)
    return value if isinstance(value, str) else None


def flush_folder(folder: str) -> None:
    """fsyncs every file of `folder`, then the folder: a rename may reach the disk
    before the data it names, and a crash would then publish empty files."""
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            with open(path, "rb") as file:
                os.fsync(file.fileno())
    _fsync_directory(folder)


def publish(temporary: str, target: str, replaces: str | None, fingerprint_file: str) -> bool:
    """Renames the complete folder `temporary` to `target`, unless another preparer
    published `target` since this one started.

    Args:
        temporary: The complete folder (its fingerprint file names its publication).
        target: The version folder.
        replaces: The publication id `target` had when this preparation started (None if
            it had none): only that one is replaced.
        fingerprint_file: The name of the fingerprint file in a version folder.

    Returns:
        True if `temporary` is now `target`; False if another preparer's version won,
        in which case `temporary` is removed.
    """
    current = publication_id(target, fingerprint_file) if os.path.isdir(target) else None
    if current is not None and current != replaces:
        discard(temporary)
        return False
    if os.path.isdir(target):
        # The version this preparation replaces (broken, or --force_prepare).
        aside = os.path.join(os.path.dirname(target), TRASH_PREFIX + uuid.uuid4().hex)
        try:
            os.rename(target, aside)
        except FileNotFoundError:
            pass
        else:
            if publication_id(aside, fingerprint_file) not in (None, replaces):
                # Another preparer published between the check and the rename: put its
                # version back, or drop it if yet another took the place meanwhile.
                _rename_or_discard(aside, target)
                discard(temporary)
                return False
            _remove_tree(aside)
    try:
        os.rename(temporary, target)
    except OSError as error:  # ENOTEMPTY or EEXIST: another preparer won the race.
        if not os.path.isdir(target) or not os.listdir(target):
            raise
        logging.info("%s was published by another preparer first (%s).", target, error)
        discard(temporary)
        return False
    _fsync_directory(os.path.dirname(target))
    return True


def discard(folder: str) -> None:
    """Removes `folder` (renamed aside first; nothing if it is gone already)."""
    aside = os.path.join(os.path.dirname(folder), TRASH_PREFIX + uuid.uuid4().hex)
    try:
        os.rename(folder, aside)
    except FileNotFoundError:
        return
    _remove_tree(aside)


def remove_unfinished(data_dir: str, keep: str) -> None:
    """Removes the temporary folders of preparers that are gone or lost the lock (all
    but `keep`) and leftover trash. Called by the lock holder only: a preparer that
    lost the lock while paused then fails on resuming, and waits for the holder."""
    for name in _names(data_dir):
        path = os.path.join(data_dir, name)
        if name.startswith(TEMPORARY_PREFIX) and path != keep:
            logging.info("Removing %s, left by a preparer that stopped.", path)
            discard(path)
        elif name.startswith(TRASH_PREFIX):
            _remove_tree(path)


def remove_other_versions(data_dir: str, current: str) -> None:
    """Removes the version folders other than `current` (older preparations)."""
    for name in _names(data_dir):
        path = os.path.join(data_dir, name)
        if name.startswith(VERSION_PREFIX) and path != current and os.path.isdir(path):
            logging.info("Removing %s, replaced by %s.", path, current)
            discard(path)


def resolve(data_dir: str, fingerprint_file: str) -> str:
    """Returns the folder holding `data_dir`'s prepared files: the version its
    fingerprint file points at, or `data_dir` itself (a version folder, or a copy of
    one)."""
    fields = read_fingerprint_fields(os.path.join(data_dir, fingerprint_file))
    name = (fields or {}).get(VERSION_KEY)
    if isinstance(name, str) and name.startswith(VERSION_PREFIX) and os.sep not in name:
        return os.path.join(data_dir, name)
    return data_dir


def write_pointer(data_dir: str, fingerprint_file: str, version: str) -> None:
    """Points `data_dir`'s fingerprint file at the version folder `version`: a copy of
    the version's own fingerprint fields plus the folder's name, written atomically."""
    fields = read_fingerprint_fields(os.path.join(version, fingerprint_file)) or {}
    fields[VERSION_KEY] = os.path.basename(version)
    path = os.path.join(data_dir, fingerprint_file)
    temporary = f"{path}.tmp-{uuid.uuid4().hex}"
    with open(temporary, "w", encoding="utf-8") as file:
        json.dump(fields, file, indent=2, sort_keys=True)
        file.write("\n")
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)


def _rename_or_discard(source: str, target: str) -> None:
    try:
        os.rename(source, target)
    except OSError:
        _remove_tree(source)


def _remove_tree(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


def _names(data_dir: str) -> list[str]:
    try:
        return os.listdir(data_dir)
    except FileNotFoundError:
        return []


def _fsync_directory(path: str) -> None:
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except OSError:  # Not on every platform.
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)
