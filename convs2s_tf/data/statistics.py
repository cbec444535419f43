"""Corpus statistics for the data summary: token counts and length percentiles."""

from collections.abc import Iterable, Iterator

import numpy as np
import sentencepiece as spm

from convs2s_tf import vocabulary

PERCENTILES = (50, 90, 95, 99)
_ENCODE_CHUNK_LINES = 10_000


def length_summary(lengths: np.ndarray) -> dict[str, float | int]:
    """Returns mean, percentiles (nearest rank, as ints) and maximum of `lengths`."""
    if lengths.size == 0:
        return {"mean": 0.0, **{f"p{p}": 0 for p in PERCENTILES}, "max": 0}
    summary: dict[str, float | int] = {"mean": round(float(lengths.mean()), 2)}
    for percentile in PERCENTILES:
        summary[f"p{percentile}"] = int(np.percentile(lengths, percentile, method="higher"))
    summary["max"] = int(lengths.max())
    return summary


def _chunks(lines: Iterable[str], size: int) -> Iterator[list[str]]:
    chunk = []
    for line in lines:
        chunk.append(line)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def side_statistics(processor: spm.SentencePieceProcessor, path: str) -> dict:
    """Returns counts for one side of a prepared split (one sentence per line in `path`).

    `tokens` counts SentencePiece pieces without the `</s>` the model appends;
    `length_pieces` summarises the per-sentence piece counts, also without `</s>`.
    """
    piece_lengths, word_count, unk_count = [], 0, 0
    with open(path, encoding="utf-8", newline="\n") as file:
        lines = (line.rstrip("\n") for line in file)
        for chunk in _chunks(lines, _ENCODE_CHUNK_LINES):
            word_count += sum(len(line.split()) for line in chunk)
            for ids in processor.encode(chunk):
                piece_lengths.append(len(ids))
                unk_count += ids.count(vocabulary.UNK_ID)
    lengths = np.asarray(piece_lengths, dtype=np.int64)
    return {
        "sentences": int(lengths.size),
        "words": word_count,
        "tokens": int(lengths.sum()),
        "unk_tokens": unk_count,
        "length_pieces": length_summary(lengths),
    }


def side_statistics_from_histogram(
    length_histogram: np.ndarray, words: int, unk_tokens: int
) -> dict:
    """Returns `side_statistics`' figures from a histogram of piece counts (without `</s>`).

    Args:
        length_histogram: [L] int64, sentences of each piece count (index = count).
        words: whitespace-separated words of the side.
        unk_tokens: `<unk>` pieces of the side.
    """
    counts = np.asarray(length_histogram, dtype=np.int64)
    sentences = int(counts.sum())
    lengths = np.arange(counts.size)
    tokens = int((lengths * counts).sum())
    summary: dict[str, float | int] = {"mean": 0.0, **{f"p{p}": 0 for p in PERCENTILES}, "max": 0}
    if sentences:
        cumulative = np.cumsum(counts)
        summary["mean"] = round(tokens / sentences, 2)
        for percentile in PERCENTILES:
            # np.percentile(method="higher"): the value at rank ceil((n - 1) * p / 100).
            rank = int(np.ceil((sentences - 1) * percentile / 100))
            summary[f"p{percentile}"] = int(np.searchsorted(cumulative, rank + 1))
        summary["max"] = int(lengths[counts > 0].max())
    return {
        "sentences": sentences,
        "words": int(words),
        "tokens": tokens,
        "unk_tokens": int(unk_tokens),
        "length_pieces": summary,
    }
