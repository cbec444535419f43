"""Chunk files: written whole or not at all, found again, and shared between workers."""

import os

import pytest

from convs2s_tf.distillation import DistillationError
from convs2s_tf.distillation.chunks import (
    chunk_path,
    finished_chunks,
    read_chunk,
    remove_temporary_files,
    worker_chunks,
    write_chunk,
)


def test_workers_share_the_chunks_without_overlap():
    for num_chunks in (0, 1, 7, 12):
        for num_workers in (1, 2, 3, 5):
            shares = [worker_chunks(num_chunks, i, num_workers) for i in range(num_workers)]
            assert sorted(sum(shares, [])) == list(range(num_chunks))
    assert worker_chunks(7, 1, 3) == [1, 4]
    with pytest.raises(DistillationError, match="`worker_index=2` must be between 0"):
        worker_chunks(7, 2, 2)
    with pytest.raises(DistillationError, match="`num_workers` must be >= 1"):
        worker_chunks(7, 0, 0)


def test_a_chunk_is_written_whole_and_found_again(tmp_path):
    work_dir = str(tmp_path)
    assert finished_chunks(work_dir, 3) == set()
    write_chunk(chunk_path(work_dir, 1), ["Ein Hund.", "", "Zwei Katzen."])
    assert read_chunk(chunk_path(work_dir, 1), 3) == ["Ein Hund.", "", "Zwei Katzen."]
    assert finished_chunks(work_dir, 3) == {1}
    assert finished_chunks(work_dir, 1) == set()  # chunks beyond the plan do not count
    assert os.listdir(os.path.dirname(chunk_path(work_dir, 1))) == ["chunk-000001.txt"]
    with pytest.raises(DistillationError, match="holds 3 lines, not 4: delete it"):
        read_chunk(chunk_path(work_dir, 1), 4)


def test_an_interrupted_write_leaves_no_chunk(tmp_path):
    work_dir = str(tmp_path)

    def lines():
        yield "Ein Hund."
        raise KeyboardInterrupt

    class Lines:
        def __iter__(self):
            return lines()

    with pytest.raises(KeyboardInterrupt):
        write_chunk(chunk_path(work_dir, 0), Lines())
    assert finished_chunks(work_dir, 1) == set()
    assert os.listdir(os.path.dirname(chunk_path(work_dir, 0))) == []
    # A temporary file a killed process left behind is no chunk, and is cleaned up.
    stray = chunk_path(work_dir, 0) + ".tmp-0123"
    open(stray, "w").close()
    assert finished_chunks(work_dir, 1) == set()
    remove_temporary_files(work_dir)
    assert not os.path.exists(stray)
