"""The error a distillation reports for a user's mistake."""


class DistillationError(ValueError):
    """A distillation that cannot work as asked: a teacher without prepared training data,
    an output directory that is the teacher's data, a resumed run whose teacher, search
    or chunk size differs from the one it resumes, a chunk file that was tampered with."""
