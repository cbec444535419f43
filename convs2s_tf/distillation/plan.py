"""A distillation's plan: what it translates (the teacher, its search, the source) and
how the work is cut (chunks of `chunk_size` source lines), kept as `plan.json` in its
work directory so that a re-run, or another worker, does the same work or refuses.

Chunk `i` holds the teacher's translations of source lines `i * chunk_size` up to
`(i + 1) * chunk_size` (the last chunk may be shorter).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any

from convs2s_tf.atomic_files import write_text_atomically
from convs2s_tf.decoding import SearchConfig
from convs2s_tf.distillation.errors import DistillationError

PLAN_FILE = "plan.json"
# Bump when chunk files change meaning, so that older work is refused, not mixed in.
PLAN_VERSION = 1
# Search settings that do not change a translation (`parts` only splits the work; the
# best hypothesis is distilled whatever `nbest`).
_UNUSED_SEARCH_FIELDS = ("parts", "nbest")


def search_settings(search_config: SearchConfig, shortlist_sha256: str | None) -> dict[str, Any]:
    """The settings of `search_config` (and the shortlist's SHA-256, or None) that the
    teacher's translations depend on."""
    settings = {
        field: value
        for field, value in dataclasses.asdict(search_config).items()
        if field not in _UNUSED_SEARCH_FIELDS
    }
    settings["shortlist"] = shortlist_sha256
    return settings


@dataclasses.dataclass(frozen=True)
class DistillationPlan:
    """What a distillation translates and how its work is cut.

    Attributes:
        teacher: The teacher's identity (`Teacher.identity`: runs, checkpoints, data).
        search: The search settings (`search_settings`).
        chunk_size: Source lines per chunk.
        source: The training source: its file, line count and SHA-256.
        version: `PLAN_VERSION` of the code that wrote it.
    """

    teacher: dict[str, Any]
    search: dict[str, Any]
    chunk_size: int
    source: dict[str, Any]
    version: int = PLAN_VERSION

    def __post_init__(self) -> None:
        if self.chunk_size < 1:
            raise ValueError(f"`chunk_size` must be >= 1, got {self.chunk_size}.")

    @property
    def lines(self) -> int:
        """Source lines to translate."""
        return int(self.source["lines"])

    @property
    def num_chunks(self) -> int:
        """Chunks the work is cut into."""
        return math.ceil(self.lines / self.chunk_size)

    def chunk_lines(self, index: int) -> range:
        """The source lines of chunk `index`.

        >>> plan = DistillationPlan({}, {}, 4, {"lines": 10})
        >>> plan.num_chunks, plan.chunk_lines(2)
        (3, range(8, 10))
        """
        if not 0 <= index < self.num_chunks:
            raise IndexError(f"Chunk {index} is not one of the plan's {self.num_chunks}.")
        start = index * self.chunk_size
        return range(start, min(start + self.chunk_size, self.lines))

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, fields: dict[str, Any]) -> DistillationPlan:
        return cls(
            teacher=fields["teacher"],
            search=fields["search"],
            chunk_size=int(fields["chunk_size"]),
            source=fields["source"],
            version=int(fields.get("version", 0)),
        )

    def difference(self, other: DistillationPlan) -> str | None:
        """The first way `other` differs from this plan, in words (None: they agree)."""
        if self.version != other.version:
            return f"chunk files of format {self.version} there, {other.version} now"
        for key, what in (
            ("model_dirs", "teacher runs"),
            ("checkpoints", "teacher checkpoints"),
            ("data_fingerprint", "teacher's prepared data (fingerprint)"),
        ):
            there, now = self.teacher.get(key), other.teacher.get(key)
            if there != now:
                return f"the {what} {_listed(there)} there, {_listed(now)} now"
        for key in sorted(set(self.search) | set(other.search)):
            there, now = self.search.get(key), other.search.get(key)
            if there != now:
                return f"`{key}={there}` there, `{key}={now}` now"
        if self.chunk_size != other.chunk_size:
            return f"`chunk_size={self.chunk_size}` there, `chunk_size={other.chunk_size}` now"
        if self.source != other.source:
            return (
                f"a training source of {self.lines} lines (SHA-256 "
                f"{str(self.source.get('sha256'))[:12]}) there, {other.lines} lines (SHA-256 "
                f"{str(other.source.get('sha256'))[:12]}) now"
            )
        return None


def _listed(value: Any) -> str:
    if isinstance(value, list):
        return ",".join(str(item) for item in value)
    return str(value)


def plan_path(work_dir: str) -> str:
    """The plan file of a work directory."""
    return os.path.join(work_dir, PLAN_FILE)


def read_plan(work_dir: str) -> DistillationPlan | None:
    """The plan kept in `work_dir`, or None if it has none yet.

    Raises:
        DistillationError: The plan file is unreadable.
    """
    path = plan_path(work_dir)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as file:
            return DistillationPlan.from_json(json.load(file))
    except (ValueError, KeyError, TypeError) as error:
        raise DistillationError(
            f"{path} is not a distillation plan ({error}): delete the directory "
            f"{work_dir}, or give another `output_data_dir`."
        ) from None


def write_plan(work_dir: str, plan: DistillationPlan) -> None:
    """Writes `plan` into `work_dir` atomically (a temporary name, fsync, rename)."""
    text = json.dumps(plan.to_json(), indent=2, sort_keys=True) + "\n"
    write_text_atomically(plan_path(work_dir), [text])


def agree_on_plan(work_dir: str, plan: DistillationPlan) -> bool:
    """Makes `plan` the plan of `work_dir`, or checks that it is already.

    Several workers may start at once: each writes the same plan, and each checks the
    plan it reads back, so that workers with other settings never mix their chunks.

    Returns:
        Whether the work directory had this plan already (a resumed distillation).

    Raises:
        DistillationError: `work_dir` holds another plan; the message names the first
            difference.
    """
    existing = read_plan(work_dir)
    resumed = existing is not None
    if existing is None:
        write_plan(work_dir, plan)
        existing = read_plan(work_dir)
    assert existing is not None
    difference = existing.difference(plan)
    if difference is not None:
        raise DistillationError(
            f"{plan_path(work_dir)} plans another distillation ({difference}): resume it "
            "with the settings it names, or give another `output_data_dir`."
        )
    return resumed
