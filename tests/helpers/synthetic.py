"""Small synthetic translation batches (a copy task) for training-loop tests."""

import numpy as np
import tensorflow as tf

from convs2s_tf.vocabulary import EOS_ID, PAD_ID

from .models import small_model_config

VOCAB = 24
KEYS = ("source", "target_input", "target")


def make_batch(rng, sentences, max_length=7):
    """A right-padded copy-task batch of `sentences` pairs of varied lengths."""
    lengths = rng.integers(2, max_length, size=sentences)
    width = int(lengths.max()) + 1 if sentences else 1
    source = np.full([sentences, width], PAD_ID, np.int32)
    for row, length in enumerate(lengths):
        source[row, :length] = rng.integers(4, VOCAB, size=length)
        source[row, length] = EOS_ID
    target = source.copy()
    target_input = np.where(target == PAD_ID, PAD_ID, np.roll(target, 1, axis=1))
    target_input[:, 0] = EOS_ID
    return {"source": source, "target_input": target_input.astype(np.int32), "target": target}


def split_batch(batch, rows):
    """Splits a batch into per-replica batches of the given row counts (0 allowed)."""
    parts, start = [], 0
    for count in rows:
        parts.append({key: value[start : start + count] for key, value in batch.items()})
        start += count
    return parts


def dataset(seed, batches, sentences=6):
    rng = np.random.default_rng(seed)
    items = [make_batch(rng, sentences) for _ in range(batches)]
    return tf.data.Dataset.from_generator(
        lambda: iter(items),
        output_signature={key: tf.TensorSpec([None, None], tf.int32) for key in KEYS},
    )


def model_fn():
    """The copy task's model: small, without dropout."""
    from convs2s_tf.models import ConvS2S

    return ConvS2S(**small_model_config(VOCAB, dropout=0.0))


def make_trainer(model_dir, **config):
    """A one-device `Trainer` of `model_fn` in `model_dir` (progress bar off)."""
    from convs2s_tf.training import Trainer, TrainingConfig, create_strategy

    config.setdefault("progress_bar", False)
    return Trainer(
        model_fn, TrainingConfig(**config), str(model_dir), create_strategy("one_device")
    )


class EpochBatches:
    """A `TrainingInput` made of one dataset per epoch, `fn(epoch, input_context)`.

    Args:
        fn: returns epoch `epoch`'s (1-based) batches.
        steps_per_epoch: steps an epoch (default: the batches of epoch 1).
        epochs: epochs the run's dataset holds (tests stop long before).
    """

    def __init__(self, fn, steps_per_epoch=None, epochs=30):
        self._fn = fn
        self._steps = steps_per_epoch
        self._epochs = epochs

    def steps_per_epoch(self, placement):
        if self._steps is None:
            self._steps = sum(1 for _ in self._fn(1, None))
        return self._steps

    def dataset(self, input_context, first_epoch=1, skip=0):
        epochs = [
            self._fn(e, input_context) for e in range(first_epoch, first_epoch + self._epochs)
        ]
        batches = epochs[0].skip(skip)
        for epoch in epochs[1:]:
            batches = batches.concatenate(epoch)
        return batches
