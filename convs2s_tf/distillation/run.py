"""A distillation from start to end (`distill`): the teacher found and checked, the plan
agreed, this worker's unfinished chunks translated, and, once every chunk is done, the
distilled data prepared."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable

from absl import logging

from convs2s_tf.data.data_directory import FINGERPRINT_FILE
from convs2s_tf.data.prepare import PrepareConfig, PrepareResult, prepare_data
from convs2s_tf.data.sources import file_sha256
from convs2s_tf.data.text_files import read_lines
from convs2s_tf.decoding import SearchConfig
from convs2s_tf.distillation.assembly import (
    copy_sentencepiece_model,
    distilled_prepare_config,
    write_corpus,
)
from convs2s_tf.distillation.chunks import (
    chunk_path,
    finished_chunks,
    worker_chunks,
    write_chunk,
)
from convs2s_tf.distillation.errors import DistillationError
from convs2s_tf.distillation.plan import DistillationPlan, agree_on_plan, search_settings
from convs2s_tf.distillation.teacher import Teacher, find_teacher
from convs2s_tf.distillation.teacher_search import translate_lines
from convs2s_tf.inference.factory import open_translator
from convs2s_tf.inference.translator import BATCH_SIZE, Translator

# The work directory inside the output data directory: plan.json, chunks/, corpus/.
WORK_SUBDIR = "distillation"
# Source lines per chunk: minutes of a small machine's work, so an interruption costs
# little, and few files even for WMT-sized corpora.
CHUNK_SIZE = 2000

# Progress: called with (sentences translated so far, sentences to translate).
ProgressCallback = Callable[[int, int], None]


@dataclasses.dataclass(frozen=True)
class DistillationConfig:
    """What to distil, and how.

    Attributes:
        model_dir: The teacher: a run directory, or several separated by commas (an
            ensemble).
        output_data_dir: The prepared data directory to write (its `distillation/`
            subdirectory keeps the work: the plan, the chunks and the corpus).
        checkpoint: The teacher's checkpoint (one per run, comma-separated), or None:
            each run's averaged, else best, else latest.
        search_config: The teacher's search.
        shortlist: A shortlist file the teacher decodes against, or None.
        batch_size: Sentences per batch.
        chunk_size: Source lines per chunk (the unit of resuming and of splitting work).
        worker_index: This worker's number, in `[0, num_workers)`.
        num_workers: Workers sharing the chunks: worker `i` translates chunks `i`,
            `i + num_workers`, ...
        keep_original_targets: Keep the original training pairs beside the distilled
            ones.
        prepare_workers: Tokenising processes of the preparation (0: one per core).
        in_flight: Batches searched at once (None: `map_in_flight`'s default).
    """

    model_dir: str
    output_data_dir: str
    checkpoint: str | None = None
    search_config: SearchConfig = dataclasses.field(default_factory=SearchConfig)
    shortlist: str | None = None
    batch_size: int = BATCH_SIZE
    chunk_size: int = CHUNK_SIZE
    worker_index: int = 0
    num_workers: int = 1
    keep_original_targets: bool = False
    prepare_workers: int = 0
    in_flight: int | None = None

    def validate(self) -> DistillationConfig:
        """Raises `DistillationError` naming the first setting that cannot work; returns
        self."""
        if not self.output_data_dir:
            raise DistillationError("Give the data directory to write (`output_data_dir`).")
        for name in ("batch_size", "chunk_size", "num_workers"):
            if getattr(self, name) < 1:
                raise DistillationError(f"`{name}` must be >= 1, got {getattr(self, name)}.")
        worker_chunks(0, self.worker_index, self.num_workers)
        return self


@dataclasses.dataclass(frozen=True)
class DistillationResult:
    """What `distill` did.

    Attributes:
        plan: The distillation's plan.
        resumed: Whether the work directory had the plan already.
        chunks_translated: Chunks this call translated.
        chunks_left: Chunks still unwritten (other workers'), once this call's are done.
        prepared: The distilled data, once every chunk is done (else None).
        prepare_config: How it was prepared (else None): a training run that prepares
            its data first needs these settings to find it up to date.
        work_dir: The work directory.
    """

    plan: DistillationPlan
    resumed: bool
    chunks_translated: int
    chunks_left: int
    prepared: PrepareResult | None
    prepare_config: PrepareConfig | None
    work_dir: str


def _same_directory(first: str, second: str) -> bool:
    return os.path.realpath(first) == os.path.realpath(second)


def _check_output_dir(output_data_dir: str, teacher: Teacher) -> None:
    """Refuses to write the distilled data over the teacher's own."""
    version = teacher.data.data_dir
    teacher_dirs = [version, os.path.dirname(version)]
    if not os.path.isfile(os.path.join(os.path.dirname(version), FINGERPRINT_FILE)):
        teacher_dirs = [version]  # A copy of a version folder serves as it is.
    for teacher_dir in teacher_dirs:
        if _same_directory(output_data_dir, teacher_dir):
            raise DistillationError(
                f"The output data directory {output_data_dir} is the teacher's prepared "
                f"data ({teacher_dir}): give another `output_data_dir`, the distilled data "
                "would replace what the teacher was trained on."
            )
    for model_dir in teacher.model_dirs:
        if _same_directory(output_data_dir, model_dir):
            raise DistillationError(
                f"The output data directory {output_data_dir} is the teacher's run "
                "directory: give another `output_data_dir`."
            )


def _plan(config: DistillationConfig, teacher: Teacher, lines: int) -> DistillationPlan:
    source_path = teacher.training_files()[0]
    return DistillationPlan(
        teacher=teacher.identity(),
        search=search_settings(
            config.search_config, file_sha256(config.shortlist) if config.shortlist else None
        ),
        chunk_size=config.chunk_size,
        source={"file": source_path, "lines": lines, "sha256": file_sha256(source_path)},
    )


def _open_teacher(config: DistillationConfig, teacher: Teacher) -> Translator:
    return open_translator(
        model_dir=list(teacher.model_dirs),
        checkpoint=",".join(teacher.checkpoints),
        search_config=config.search_config,
        # Each bucket compiles on its second batch, as pipelines.translate does.
        warm_up=False,
        shortlist=config.shortlist,
    )


def distill(
    config: DistillationConfig,
    progress: ProgressCallback | None = None,
    translator: Translator | None = None,
) -> DistillationResult:
    """Distils the teacher's training source into `config.output_data_dir`.

    The teacher translates this worker's unfinished chunks, each written whole as soon as
    it is done; a worker that then finds every chunk written assembles the corpus and
    prepares it (the others return with `chunks_left` > 0: re-run any of them once all
    are done). Run again, it resumes where it stopped.

    Args:
        config: What to distil.
        progress: Called with (sentences done, sentences to do) before the first chunk
            and after every batch.
        translator: The teacher's translator (default: loaded from `config.model_dir`,
            only if there are chunks to translate).

    Raises:
        DistillationError: The teacher or the output directory cannot serve, or the work
            directory holds another distillation.
        FileNotFoundError, CheckpointError, InferenceError: See `find_teacher` and
            `convs2s_tf.inference.open_translator`.
    """
    config.validate()
    teacher = find_teacher(config.model_dir, config.checkpoint)
    _check_output_dir(config.output_data_dir, teacher)
    sources = read_lines(teacher.training_files()[0])
    if not sources:
        raise DistillationError(
            f"The teacher's training source {teacher.training_files()[0]} is empty."
        )
    plan = _plan(config, teacher, len(sources))
    work_dir = os.path.join(config.output_data_dir, WORK_SUBDIR)
    resumed = agree_on_plan(work_dir, plan)
    done = finished_chunks(work_dir, plan.num_chunks)
    todo = [
        index
        for index in worker_chunks(plan.num_chunks, config.worker_index, config.num_workers)
        if index not in done
    ]
    logging.info(
        "%d chunk(s) of %d to translate (%d already written)", len(todo), plan.num_chunks, len(done)
    )
    total = sum(len(plan.chunk_lines(index)) for index in todo)
    translated = 0
    if todo:
        if translator is None:
            translator = _open_teacher(config, teacher)
        if progress is not None:
            progress(0, total)

        def on_batch(sentences: int) -> None:
            nonlocal translated
            translated += sentences
            if progress is not None:
                progress(translated, total)

        for index in todo:
            lines = plan.chunk_lines(index)
            translations = translate_lines(
                translator,
                sources[lines.start : lines.stop],
                config.batch_size,
                config.in_flight,
                on_batch,
            )
            write_chunk(chunk_path(work_dir, index), translations)
    left = plan.num_chunks - len(finished_chunks(work_dir, plan.num_chunks))
    prepare_config = prepared = None
    if not left:
        prefixes = write_corpus(work_dir, plan, teacher, config.keep_original_targets)
        prepare_config = distilled_prepare_config(
            config.output_data_dir,
            prefixes,
            teacher,
            copy_sentencepiece_model(work_dir, teacher),
            config.prepare_workers,
        )
        prepared = prepare_data(prepare_config)
    return DistillationResult(
        plan=plan,
        resumed=resumed,
        chunks_translated=len(todo),
        chunks_left=left,
        prepared=prepared,
        prepare_config=prepare_config,
        work_dir=work_dir,
    )
