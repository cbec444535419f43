"""`distill` for one worker and for several: chunks translated and written, resumed
after an interruption, refused with other settings, and assembled into prepared data
tokenised with the teacher's SentencePiece model.

The teacher is `tiny_run`'s model over a 60-pair corpus prepared with its vocabulary;
a stand-in translator (each source's words reversed) keeps most tests to the chunk
logic, and one test translates with the model itself.
"""

import json
import os
import shutil

import pytest
from helpers.corpora import write_local_corpus

from convs2s_tf.data.cleaning import CleaningConfig
from convs2s_tf.data.prepare import PrepareConfig, prepare_data
from convs2s_tf.data.sources import file_sha256
from convs2s_tf.data.text_files import read_lines
from convs2s_tf.decoding import SearchConfig
from convs2s_tf.distillation import DistillationConfig, DistillationError, distill
from convs2s_tf.distillation.chunks import chunk_path, finished_chunks
from convs2s_tf.inference import Translator

TRAIN_PAIRS = 60
SEARCH = SearchConfig(beam_size=2, max_len_a=1.2, max_len_b=5)


class Reverser(Translator):
    """A stand-in teacher: each text's words in reverse order; counts the texts, and
    fails once it has translated `fail_after` of them, if set."""

    max_nbest = 1

    def __init__(self, fail_after=None):
        self.translated = 0
        self.fail_after = fail_after

    def _translate(self, texts, nbest):
        if self.fail_after is not None and self.translated >= self.fail_after:
            raise KeyboardInterrupt
        self.translated += len(texts)
        return [[(" ".join(reversed(text.split())), 0.0)] for text in texts]


@pytest.fixture(scope="module")
def teacher(tiny_run, small_prepared, tmp_path_factory):
    """(run directory, its PreparedData): `tiny_run`'s model trained, as far as its
    config says, on 60 pairs prepared with its SentencePiece model (cleaning by length
    ratio off: a random teacher's translations have any length)."""
    root = tmp_path_factory.mktemp("teacher")
    prefixes = write_local_corpus(root / "corpus", TRAIN_PAIRS, 8, 8)
    data = prepare_data(
        PrepareConfig(
            data_dir=str(root / "data"),
            dataset="local",
            split_prefixes=prefixes,
            cleaning=CleaningConfig(max_length_ratio=0),
            num_shards=2,
            workers=1,
            sentencepiece_model=small_prepared.data.sentencepiece_model_path,
        )
    ).data
    run = root / "run"
    shutil.copytree(tiny_run, run)
    config = json.loads((run / "config.json").read_text())
    config["data_dir"] = str(root / "data")
    (run / "config.json").write_text(json.dumps(config))
    return run, data


def _config(teacher, output, **changes):
    run, _ = teacher
    settings = dict(
        model_dir=str(run),
        output_data_dir=str(output),
        search_config=SEARCH,
        batch_size=8,
        chunk_size=16,
        prepare_workers=1,
        in_flight=1,
    )
    return DistillationConfig(**{**settings, **changes})


def _pairs(data, split="train"):
    source, target = data.split_paths(split)
    return list(zip(read_lines(source), read_lines(target)))


def test_two_workers_share_the_chunks_and_the_last_prepares(teacher, tmp_path):
    run, teacher_data = teacher
    first = distill(
        _config(teacher, tmp_path, worker_index=0, num_workers=2), translator=Reverser()
    )
    assert (first.plan.num_chunks, first.chunks_translated, first.chunks_left) == (4, 2, 2)
    assert first.prepared is None and not first.resumed
    assert finished_chunks(first.work_dir, 4) == {0, 2}
    reverser = Reverser()
    second = distill(_config(teacher, tmp_path, worker_index=1, num_workers=2), translator=reverser)
    assert (second.chunks_translated, second.chunks_left, reverser.translated) == (2, 0, 28)
    data = second.prepared.data
    expected = [(source, " ".join(reversed(source.split()))) for source, _ in _pairs(teacher_data)]
    assert _pairs(data) == expected
    # The teacher's vocabulary and evaluation splits, as they are.
    assert file_sha256(data.sentencepiece_model_path) == file_sha256(
        teacher_data.sentencepiece_model_path
    )
    assert data.summary["vocab_size"] == teacher_data.summary["vocab_size"]
    for split in ("validation", "test"):
        assert _pairs(data, split) == _pairs(teacher_data, split)
    assert len(data.shard_paths("train")) == 2  # the teacher data's shard count
    # A run of a finished distillation translates nothing and prepares nothing.
    again = distill(_config(teacher, tmp_path), translator=Reverser(fail_after=0))
    assert (again.chunks_translated, again.resumed, again.prepared.reused) == (0, True, True)


def test_an_interrupted_run_resumes_at_its_first_unwritten_chunk(teacher, tmp_path):
    with pytest.raises(KeyboardInterrupt):
        distill(_config(teacher, tmp_path), translator=Reverser(fail_after=32))
    work_dir = tmp_path / "distillation"
    assert finished_chunks(str(work_dir), 4) == {0, 1}
    assert sorted(os.listdir(work_dir / "chunks")) == ["chunk-000000.txt", "chunk-000001.txt"]
    reverser = Reverser()
    resumed = distill(_config(teacher, tmp_path, batch_size=5), translator=reverser)
    assert (resumed.resumed, resumed.chunks_translated, reverser.translated) == (True, 2, 28)
    assert resumed.prepared.summary["splits"]["train"]["pairs_kept"] == TRAIN_PAIRS


def test_a_resumed_run_with_other_settings_is_refused(teacher, tmp_path):
    distill(_config(teacher, tmp_path, num_workers=4), translator=Reverser())
    with pytest.raises(DistillationError, match="`chunk_size=16` there, `chunk_size=20` now"):
        distill(_config(teacher, tmp_path, chunk_size=20), translator=Reverser())
    other_search = SEARCH.replace(beam_size=3)
    with pytest.raises(DistillationError, match="`beam_size=2` there, `beam_size=3` now"):
        distill(_config(teacher, tmp_path, search_config=other_search), translator=Reverser())
    other_teacher = tmp_path / "other_run"
    shutil.copytree(teacher[0], other_teacher)
    with pytest.raises(DistillationError, match="teacher runs .* there, .*other_run now"):
        distill(_config(teacher, tmp_path, model_dir=str(other_teacher)), translator=Reverser())
    assert finished_chunks(str(tmp_path / "distillation"), 4) == {0}


def test_the_original_pairs_can_be_kept_beside_the_distilled_ones(teacher, tmp_path):
    result = distill(_config(teacher, tmp_path, keep_original_targets=True), translator=Reverser())
    pairs = _pairs(result.prepared.data)
    originals = _pairs(teacher[1])
    assert pairs[:TRAIN_PAIRS] == originals and len(pairs) == 2 * TRAIN_PAIRS


def test_unusable_teachers_and_outputs_are_refused(teacher, tmp_path):
    run, teacher_data = teacher
    for output in (teacher_data.data_dir, os.path.dirname(teacher_data.data_dir), run):
        with pytest.raises(DistillationError, match="is the teacher's"):
            distill(_config(teacher, output), translator=Reverser())
    with pytest.raises(FileNotFoundError, match="config.json does not exist"):
        distill(_config(teacher, tmp_path, model_dir=str(tmp_path / "missing")))
    # A teacher whose prepared data lost its training split.
    data_copy = tmp_path / "data_copy"
    shutil.copytree(teacher_data.data_dir, data_copy)
    os.remove(data_copy / "train.en")
    no_train = tmp_path / "no_train"
    shutil.copytree(run, no_train)
    config = json.loads((no_train / "config.json").read_text())
    (no_train / "config.json").write_text(json.dumps({**config, "data_dir": str(data_copy)}))
    with pytest.raises(DistillationError, match="has no prepared training split"):
        distill(_config(teacher, tmp_path / "out", model_dir=str(no_train)))
    # An imported run names no prepared data.
    del config["data_dir"]
    (no_train / "config.json").write_text(json.dumps(config))
    with pytest.raises(DistillationError, match="names no prepared data"):
        distill(_config(teacher, tmp_path / "out", model_dir=str(no_train)))
    with pytest.raises(DistillationError, match="`worker_index=3` must be between 0"):
        distill(_config(teacher, tmp_path / "out", worker_index=3, num_workers=2))


def test_the_teacher_model_translates_the_chunks(teacher, tmp_path):
    from convs2s_tf.inference import open_translator

    run, teacher_data = teacher
    result = distill(_config(teacher, tmp_path, chunk_size=40, batch_size=40))
    assert result.chunks_translated == 2
    sources = [source for source, _ in _pairs(teacher_data)]
    translator = open_translator(model_dir=str(run), search_config=SEARCH, warm_up=False)
    # Chunked and batched, the same translations as all lines at once.
    expected = [" ".join(text.split()) for text in translator.translate_all(sources, 64)]
    chunks = [chunk_path(result.work_dir, index) for index in range(2)]
    written = [line for path in chunks for line in read_lines(path)]
    assert written == expected
