"""Assembling a finished distillation: the chunks and the source lines into a local
corpus (the teacher data's validation and test splits beside it), then that corpus
prepared with the teacher's SentencePiece model, as any corpus is (`prepare_data`,
configured by `distilled_prepare_config`)."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterable

from convs2s_tf.data.cleaning import CleaningConfig
from convs2s_tf.data.data_directory import SENTENCEPIECE_PREFIX
from convs2s_tf.data.prepare import PrepareConfig
from convs2s_tf.data.sources import LOCAL
from convs2s_tf.data.text_files import read_lines
from convs2s_tf.distillation.chunks import chunk_path, read_chunk, remove_temporary_files
from convs2s_tf.distillation.errors import DistillationError
from convs2s_tf.distillation.plan import DistillationPlan
from convs2s_tf.distillation.teacher import Teacher

CORPUS_SUBDIR = "corpus"
# The teacher data's splits the distilled data keeps as they are.
EVALUATION_SPLITS = ("validation", "test")


def _write_pairs(pairs: Iterable[tuple[str, str]], source_path: str, target_path: str) -> int:
    """Writes pairs to two files under temporary names, renamed once complete; returns
    how many."""
    token = uuid.uuid4().hex
    temporary = (f"{source_path}.tmp-{token}", f"{target_path}.tmp-{token}")
    count = 0
    with (
        open(temporary[0], "w", encoding="utf-8", newline="\n") as source_file,
        open(temporary[1], "w", encoding="utf-8", newline="\n") as target_file,
    ):
        for source, target in pairs:
            source_file.write(source + "\n")
            target_file.write(target + "\n")
            count += 1
    os.replace(temporary[0], source_path)
    os.replace(temporary[1], target_path)
    return count


def _copy(source: str, target: str) -> None:
    temporary = f"{target}.tmp-{uuid.uuid4().hex}"
    shutil.copyfile(source, temporary)
    os.replace(temporary, target)


def distilled_pairs(
    work_dir: str, plan: DistillationPlan, sources: list[str]
) -> Iterable[tuple[str, str]]:
    """Yields (source line, teacher translation) for every line of the plan, chunk by
    chunk.

    Raises:
        DistillationError: A chunk file holds another number of lines than its chunk.
    """
    for index in range(plan.num_chunks):
        lines = plan.chunk_lines(index)
        translations = read_chunk(chunk_path(work_dir, index), len(lines))
        yield from zip(sources[lines.start : lines.stop], translations)


def write_corpus(
    work_dir: str, plan: DistillationPlan, teacher: Teacher, keep_original_targets: bool
) -> dict[str, str]:
    """Writes the distilled corpus into `work_dir/corpus/` as local corpus files.

    The training split holds every source line with the teacher's translation (after the
    original pairs, if `keep_original_targets`); the validation and test splits are the
    teacher data's.

    Returns:
        {split: file prefix}, as `PrepareConfig.split_prefixes` takes it.

    Raises:
        DistillationError: The teacher's training source is not the plan's, or a chunk
            file is damaged.
    """
    # Absolute: the corpus' paths are part of the prepared data's fingerprint, which
    # must not depend on the working directory of whoever prepares it again.
    corpus = os.path.join(os.path.abspath(work_dir), CORPUS_SUBDIR)
    os.makedirs(corpus, exist_ok=True)
    source_lang, target_lang = teacher.source_lang, teacher.target_lang
    train_source, train_target = teacher.training_files()
    sources = read_lines(train_source)
    if len(sources) != plan.lines:
        raise DistillationError(
            f"The teacher's training source {train_source} has {len(sources)} lines, the "
            f"plan {plan.lines}: it changed since the distillation began; give another "
            "`output_data_dir`."
        )

    def training_pairs() -> Iterable[tuple[str, str]]:
        if keep_original_targets:
            yield from zip(sources, read_lines(train_target))
        yield from distilled_pairs(work_dir, plan, sources)

    prefixes = {"train": os.path.join(corpus, "train")}
    _write_pairs(
        training_pairs(),
        f"{prefixes['train']}.{source_lang}",
        f"{prefixes['train']}.{target_lang}",
    )
    for split in EVALUATION_SPLITS:
        if split not in teacher.data.splits:
            continue
        prefixes[split] = os.path.join(corpus, split)
        for path, language in zip(teacher.data.split_paths(split), (source_lang, target_lang)):
            _copy(path, f"{prefixes[split]}.{language}")
    remove_temporary_files(work_dir)
    return prefixes


def copy_sentencepiece_model(work_dir: str, teacher: Teacher) -> str:
    """Copies the teacher's SentencePiece model (and the `.vocab` file beside it, if any)
    into `work_dir/corpus/`, so that the distilled data can be prepared again whatever
    becomes of the teacher's data; returns the copy's absolute path."""
    corpus = os.path.join(os.path.abspath(work_dir), CORPUS_SUBDIR)
    os.makedirs(corpus, exist_ok=True)
    model = os.path.join(corpus, SENTENCEPIECE_PREFIX + ".model")
    _copy(teacher.sentencepiece_model, model)
    vocabulary = os.path.splitext(teacher.sentencepiece_model)[0] + ".vocab"
    if os.path.isfile(vocabulary):
        _copy(vocabulary, os.path.join(corpus, SENTENCEPIECE_PREFIX + ".vocab"))
    return model


def distilled_prepare_config(
    output_data_dir: str,
    prefixes: dict[str, str],
    teacher: Teacher,
    sentencepiece_model: str,
    workers: int = 0,
) -> PrepareConfig:
    """How the distilled corpus is prepared into `output_data_dir`: with the teacher's
    SentencePiece model (no new vocabulary), the teacher data's cleaning and shard count.

    Args:
        output_data_dir: The data directory to prepare.
        prefixes: The corpus (`write_corpus`).
        teacher: The teacher.
        sentencepiece_model: The copy of the teacher's model (`copy_sentencepiece_model`).
        workers: Tokenising processes (0: one per CPU core).
    """
    options = teacher.data.summary.get("options", {})
    cleaning = CleaningConfig(**options.get("cleaning", {}))
    return PrepareConfig(
        data_dir=output_data_dir,
        dataset=LOCAL,
        source_lang=teacher.source_lang,
        target_lang=teacher.target_lang,
        split_prefixes=prefixes,
        # As the flags give them (a fingerprint tells 0 from 0.0), so that the data
        # flags of this preparation find it up to date.
        cleaning=CleaningConfig(int(cleaning.max_words), float(cleaning.max_length_ratio)),
        num_shards=int(options.get("num_shards", 0)),
        workers=workers,
        sentencepiece_model=sentencepiece_model,
    )
