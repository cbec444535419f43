"""A lexical translation table from parallel token ids: IBM model 1, fitted with numpy.

IBM model 1 (Brown et al., 1993) explains each target token of a pair by one source token
of the same pair (or by an empty source, NULL) with probability `t(target | source)`, and
fits `t` by expectation maximisation. It is the lexical model the paper's shortlist and
the toolkits that ship one (fast_align tables in Marian and CTranslate2) rank candidates
by. Every (sentence, source token, target token) link is one entry of flat arrays, so an
iteration is a few `bincount`s over them, however many sentences there are.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class TranslationTable:
    """The fitted `t(target | source)` as sparse entries, and the target counts.

    Attributes:
        source_ids: `[entries]` int64 source ids (`source_vocab_size` is NULL).
        target_ids: `[entries]` int64 target ids.
        probabilities: `[entries]` float64 `t(target | source)`.
        target_counts: `[target_vocab_size]` int64 occurrences of each target id.
        source_vocab_size: Source ids are below this.
        target_vocab_size: Target ids are below this.
        sentences: Pairs the table was fitted on.
    """

    source_ids: np.ndarray
    target_ids: np.ndarray
    probabilities: np.ndarray
    target_counts: np.ndarray
    source_vocab_size: int
    target_vocab_size: int
    sentences: int

    def top_targets(self, k: int) -> np.ndarray:
        """`[source_vocab_size, k]` int32: per source id its `k` most probable targets,
        best first; rows with fewer known targets are filled with -1."""
        table = np.full([self.source_vocab_size, k], -1, np.int32)
        real = self.source_ids < self.source_vocab_size  # NULL explains, it has no row
        sources = self.source_ids[real]
        targets = self.target_ids[real]
        # Sorted by source, then by falling probability (ties: lower target id first).
        order = np.lexsort((targets, -self.probabilities[real], sources))
        sources, targets = sources[order], targets[order]
        starts = np.searchsorted(sources, sources, side="left")
        rank = np.arange(len(sources)) - starts
        keep = rank < k
        table[sources[keep], rank[keep]] = targets[keep]
        return table

    def most_frequent(self, n: int) -> np.ndarray:
        """`[n]` int32: the `n` most frequent target ids, most frequent first (ties: lower
        id first), only ids that occur."""
        order = np.lexsort((np.arange(self.target_vocab_size), -self.target_counts))
        order = order[self.target_counts[order] > 0]
        return order[:n].astype(np.int32)


def _links(
    pairs: Iterable[tuple[Sequence[int], Sequence[int]]], null_id: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The flat link arrays of `pairs`: per link its source id, target id and target
    position (a running index over every target token of every pair)."""
    sources, targets, positions = [], [], []
    position = 0
    for pair_source, pair_target in pairs:
        source = np.append(np.asarray(pair_source, np.int64), null_id)
        target = np.asarray(pair_target, np.int64)
        if not len(target):
            continue
        sources.append(np.tile(source, len(target)))
        targets.append(np.repeat(target, len(source)))
        positions.append(np.repeat(np.arange(position, position + len(target)), len(source)))
        position += len(target)
    if not sources:
        raise ValueError("No sentence pair with target tokens to align.")
    return np.concatenate(sources), np.concatenate(targets), np.concatenate(positions)


def fit_ibm1(
    pairs: Iterable[tuple[Sequence[int], Sequence[int]]],
    source_vocab_size: int,
    target_vocab_size: int,
    iterations: int = 5,
) -> TranslationTable:
    """Fits IBM model 1 on `pairs` of token id sequences.

    Args:
        pairs: `(source_ids, target_ids)` sequences of ints, without `</s>`.
        source_vocab_size: Source ids are below this.
        target_vocab_size: Target ids are below this.
        iterations: EM iterations (5, as is usual for model 1).

    Returns:
        A `TranslationTable`.

    Raises:
        ValueError: No pair has target tokens, or an id is outside its vocabulary.
    """
    pairs = list(pairs)
    null_id = source_vocab_size
    link_sources, link_targets, link_positions = _links(pairs, null_id)
    for name, ids, size in (
        ("source", link_sources, source_vocab_size + 1),
        ("target", link_targets, target_vocab_size),
    ):
        if ids.min() < 0 or ids.max() >= size:
            raise ValueError(f"A {name} id is outside the vocabulary of {size} ids.")
    keys = link_sources * target_vocab_size + link_targets
    entry_keys, link_entries = np.unique(keys, return_inverse=True)
    entry_sources = entry_keys // target_vocab_size
    probabilities = np.ones(len(entry_keys))
    for _ in range(iterations):
        # E step: each target token's links share it in proportion to t.
        link_probs = probabilities[link_entries]
        totals = np.bincount(link_positions, weights=link_probs)
        posteriors = link_probs / totals[link_positions]
        # M step: t(target | source) = expected count / the source's expected count.
        counts = np.bincount(link_entries, weights=posteriors, minlength=len(entry_keys))
        source_totals = np.bincount(entry_sources, weights=counts, minlength=null_id + 1)
        probabilities = counts / source_totals[entry_sources]
    target_counts = np.bincount(
        np.concatenate([np.asarray(t, np.int64) for _, t in pairs] or [np.zeros(0, np.int64)]),
        minlength=target_vocab_size,
    )
    return TranslationTable(
        source_ids=entry_sources,
        target_ids=entry_keys % target_vocab_size,
        probabilities=probabilities,
        target_counts=target_counts,
        source_vocab_size=source_vocab_size,
        target_vocab_size=target_vocab_size,
        sentences=len(pairs),
    )
