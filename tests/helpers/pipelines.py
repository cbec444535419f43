"""Reading what the tf.data pipelines yield, for the pipeline tests."""

import sentencepiece as spm

from convs2s_tf.vocabulary import EOS_ID


def expected_pairs(data, split):
    """The split's pairs as the model should see them: ids + </s>, via Python SentencePiece."""
    processor = spm.SentencePieceProcessor(model_file=data.sentencepiece_model_path)
    sides = [open(path, encoding="utf-8").read().splitlines() for path in data.split_paths(split)]
    encoded = [processor.encode(lines) for lines in sides]
    return [(tuple(s + [EOS_ID]), tuple(t + [EOS_ID])) for s, t in zip(*encoded)]


def unpad(row):
    """The ids up to and including the last `</s>` (padding removed)."""
    row = list(row)
    return tuple(row[: len(row) - row[::-1].index(EOS_ID)]) if EOS_ID in row else tuple(row)


def epoch_pairs(dataset):
    """All `(source, target)` id tuples of one pass over `dataset`, and its batches."""
    pairs, batches = [], []
    for batch in dataset:
        batch = {key: value.numpy() for key, value in batch.items()}
        batches.append(batch)
        pairs += [(unpad(s), unpad(t)) for s, t in zip(batch["source"], batch["target"])]
    return pairs, batches
