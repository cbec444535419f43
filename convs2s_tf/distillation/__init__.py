"""Sequence-level knowledge distillation (Kim and Rush, 2016): a teacher (a run, an
averaged run or an ensemble) translates the training source of its prepared data with
beam search, and its translations become the targets of a new prepared data directory,
tokenised with the teacher's SentencePiece model, for a student to train on.

Modules (one concept each):

* `errors`: `DistillationError`, a user's mistake;
* `teacher`: the teacher's runs, checkpoints and prepared data (`find_teacher`);
* `plan`: what a distillation translates and how its work is cut into chunks
  (`plan.json`; a resumed run with other settings is refused);
* `chunks`: chunk files, written atomically, and which chunks each worker takes;
* `teacher_search`: the teacher's search over one chunk's lines;
* `assembly`: the finished chunks into a corpus, prepared (`prepare_data`);
* `run`: `distill`, all of it for one worker.

Builds on `convs2s_tf.inference`, `convs2s_tf.data` and `convs2s_tf.runs`.
"""

from convs2s_tf.distillation.errors import DistillationError
from convs2s_tf.distillation.plan import DistillationPlan
from convs2s_tf.distillation.run import (
    CHUNK_SIZE,
    WORK_SUBDIR,
    DistillationConfig,
    DistillationResult,
    distill,
)
from convs2s_tf.distillation.teacher import Teacher, find_teacher

__all__ = [
    "CHUNK_SIZE",
    "WORK_SUBDIR",
    "DistillationConfig",
    "DistillationError",
    "DistillationPlan",
    "DistillationResult",
    "Teacher",
    "distill",
    "find_teacher",
]
