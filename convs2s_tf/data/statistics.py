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
