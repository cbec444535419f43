"""Chunk files: the teacher's translations of one chunk of source lines, one per line,
each written whole (a temporary name, fsync, rename) so that an interrupted run leaves
complete chunks or none; and which chunks each of several workers takes.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from convs2s_tf.atomic_files import write_text_atomically
from convs2s_tf.distillation.errors import DistillationError

CHUNKS_SUBDIR = "chunks"
_PREFIX = "chunk-"
_SUFFIX = ".txt"


def chunk_path(work_dir: str, index: int) -> str:
    """The file of chunk `index` in a work directory.

    >>> chunk_path("out/distillation", 12)
    'out/distillation/chunks/chunk-000012.txt'
    """
    return os.path.join(work_dir, CHUNKS_SUBDIR, f"{_PREFIX}{index:06d}{_SUFFIX}")


def worker_chunks(num_chunks: int, worker_index: int, num_workers: int) -> list[int]:
    """The chunks worker `worker_index` of `num_workers` translates: `worker_index`,
    `worker_index + num_workers`, ...

    >>> worker_chunks(7, 1, 3)
    [1, 4]

    Raises:
        DistillationError: `num_workers` < 1, or `worker_index` not in `[0, num_workers)`.
    """
    if num_workers < 1:
        raise DistillationError(f"`num_workers` must be >= 1, got {num_workers}.")
    if not 0 <= worker_index < num_workers:
        raise DistillationError(
            f"`worker_index={worker_index}` must be between 0 and `num_workers` - 1 "
            f"({num_workers - 1})."
        )
    return list(range(worker_index, num_chunks, num_workers))


def finished_chunks(work_dir: str, num_chunks: int) -> set[int]:
    """The chunks of `range(num_chunks)` whose files are written (a file is complete
    once it has its name)."""
    directory = os.path.join(work_dir, CHUNKS_SUBDIR)
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return set()
    finished = set()
    for name in names:
        number = name[len(_PREFIX) : -len(_SUFFIX)]
        if name.startswith(_PREFIX) and name.endswith(_SUFFIX) and number.isdigit():
            if int(number) < num_chunks:
                finished.add(int(number))
    return finished


def write_chunk(path: str, lines: Sequence[str]) -> None:
    """Writes `lines` (none holding a line break) to `path`, atomically."""
    write_text_atomically(path, (line + "\n" for line in lines))


def read_chunk(path: str, expected_lines: int) -> list[str]:
    """The lines of a chunk file.

    Raises:
        DistillationError: It holds another number of lines than `expected_lines` (a
            file not written by `write_chunk`).
    """
    with open(path, encoding="utf-8", newline="") as file:
        lines = file.read().split("\n")[:-1]
    if len(lines) != expected_lines:
        raise DistillationError(
            f"The chunk file {path} holds {len(lines)} lines, not {expected_lines}: delete "
            "it and run again to translate its chunk anew."
        )
    return lines


def remove_temporary_files(work_dir: str) -> None:
    """Removes the temporary files of chunk writes that were interrupted."""
    directory = os.path.join(work_dir, CHUNKS_SUBDIR)
    if not os.path.isdir(directory):
        return
    for name in os.listdir(directory):
        if name.startswith(_PREFIX) and ".tmp-" in name:
            try:
                os.remove(os.path.join(directory, name))
            except FileNotFoundError:
                pass
