"""Writing a file whole: under a temporary name in its folder, flushed to disk, renamed
over the target, and the rename flushed, so that neither a reader nor a killed writer
ever sees part of it."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable


def fsync_directory(path: str) -> None:
    """Flushes the entries of folder `path` (a rename into it) to disk; nothing where a
    folder cannot be opened for that (not POSIX)."""
    if os.name != "posix":
        return
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def write_text_atomically(
    path: str, parts: Iterable[str], temporary_prefix: str | None = None
) -> None:
    """Writes the text `parts` to `path` whole. Nothing of it stays if `parts` raises.

    Args:
        path: The file to write (its folder is made if missing).
        parts: The text, in pieces.
        temporary_prefix: The temporary file's name before a random suffix, in `path`'s
            folder (default: `NAME.tmp-`).
    """
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    prefix = os.path.basename(path) + ".tmp-" if temporary_prefix is None else temporary_prefix
    temporary = os.path.join(directory, prefix + uuid.uuid4().hex)
    try:
        with open(temporary, "w", encoding="utf-8", newline="\n") as file:
            file.writelines(parts)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise
    fsync_directory(directory)
