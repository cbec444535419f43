"""Training-corpus cleaning with the paper's defaults (Gehring et al. 2017, section 4.1).

A pair is dropped by the first rule it breaks, in this order, and counted under it:

1. `empty`: a side is empty (after whitespace normalisation);
2. `too_many_words`: a side has more than `max_words` words (175 in the paper);
3. `length_ratio`: the longer side has more than `max_length_ratio` (1.5) times the words
   of the shorter one.

Words are whitespace-separated tokens of the untokenised text (as in Moses'
clean-corpus-n.perl). Every kept sentence has its whitespace normalised (runs of any
Unicode whitespace become one space, no leading/trailing space), which SentencePiece's
normaliser would do anyway and which keeps one sentence on one line.
"""

import collections
import dataclasses
from collections.abc import Iterable, Iterator

EMPTY = "empty"
TOO_MANY_WORDS = "too_many_words"
LENGTH_RATIO = "length_ratio"
RULES = (EMPTY, TOO_MANY_WORDS, LENGTH_RATIO)


@dataclasses.dataclass(frozen=True)
class CleaningConfig:
    """Cleaning thresholds; 0 disables a rule.

    Attributes:
        max_words: drop pairs with a side longer than this many words.
        max_length_ratio: drop pairs whose longer side has more than this many times the
            words of the shorter side.
    """

    max_words: int = 175
    max_length_ratio: float = 1.5

    def __post_init__(self) -> None:
        if self.max_words < 0:
            raise ValueError(f"max_words must be >= 0 (0 disables), got {self.max_words}.")
        if self.max_length_ratio != 0 and self.max_length_ratio < 1:
            raise ValueError(
                f"max_length_ratio must be >= 1 (0 disables), got {self.max_length_ratio}."
            )


@dataclasses.dataclass
class CleaningReport:
    """How many pairs were read, kept, and dropped by each rule."""

    pairs_read: int = 0
    pairs_kept: int = 0
    dropped: collections.Counter = dataclasses.field(default_factory=collections.Counter)

    def as_dict(self) -> dict:
        return {
            "pairs_read": self.pairs_read,
            "pairs_kept": self.pairs_kept,
            "pairs_dropped": sum(self.dropped.values()),
            "dropped_by_rule": {rule: self.dropped[rule] for rule in RULES},
        }


def normalize_whitespace(text: str) -> str:
    """Collapses runs of whitespace into single spaces and strips both ends."""
    return " ".join(text.split())


def rule_broken(source_words: int, target_words: int, config: CleaningConfig) -> str | None:
    """Returns the first rule a pair with these word counts breaks, or None to keep it."""
    if source_words == 0 or target_words == 0:
        return EMPTY
    if config.max_words and max(source_words, target_words) > config.max_words:
        return TOO_MANY_WORDS
    if config.max_length_ratio and max(source_words, target_words) > config.max_length_ratio * min(
        source_words, target_words
    ):
        return LENGTH_RATIO
    return None


def clean_pairs(
    pairs: Iterable[tuple[str, str]], config: CleaningConfig, report: CleaningReport
) -> Iterator[tuple[str, str]]:
    """Yields the whitespace-normalised pairs that break no rule, counting into `report`."""
    for source, target in pairs:
        report.pairs_read += 1
        source, target = normalize_whitespace(source), normalize_whitespace(target)
        rule = rule_broken(len(source.split()), len(target.split()), config)
        if rule is None:
            report.pairs_kept += 1
            yield source, target
        else:
            report.dropped[rule] += 1


def normalize_pairs(
    pairs: Iterable[tuple[str, str]], report: CleaningReport
) -> Iterator[tuple[str, str]]:
    """Yields every pair whitespace-normalised (nothing dropped), counting into `report`."""
    for source, target in pairs:
        report.pairs_read += 1
        report.pairs_kept += 1
        yield normalize_whitespace(source), normalize_whitespace(target)
