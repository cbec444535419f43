"""A PoseNet trains with the toolkit's trainer and is searched by its beam search."""

import numpy as np
import pytest
from helpers.synthetic import VOCAB, dataset

from convs2s_tf.decoding import SearchConfig, beam_search
from convs2s_tf.models import build_model
from convs2s_tf.training import Trainer, TrainingConfig, create_strategy


def small_posenet():
    return build_model(
        {
            "family": "posenet",
            "source_vocab_size": VOCAB,
            "target_vocab_size": VOCAB,
            "hidden_dim": 16,
            "encoder_layers": 2,
            "decoder_layers": 2,
            "num_heads": 2,
            "ffn_dim": 32,
            "dropout": 0.0,
            "attention_dropout": 0.0,
            "max_source_positions": 40,
            "max_target_positions": 40,
        }
    )


@pytest.mark.slow  # over ten seconds on 2 cores
def test_posenet_trains_with_adam_and_is_searched(tmp_path):
    config = TrainingConfig(
        optimizer="adam",
        learning_rate=3e-3,
        warmup="noam",
        warmup_steps=5,
        clip_norm=1.0,
        progress_bar=False,
    )
    trainer = Trainer(small_posenet, config, str(tmp_path), create_strategy("one_device"))
    batches = trainer.strategy.experimental_distribute_dataset(dataset(seed=7, batches=30))
    trainer._build_steps(batches.element_spec)
    losses = [float(trainer._train_step(batch)["loss"]) for batch in batches]
    assert all(np.isfinite(losses))
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.3
    source = np.array([[5, 6, 7, 2], [8, 9, 2, 1]], np.int32)
    output = beam_search(trainer.model, source, SearchConfig(beam_size=3, nbest=2, max_len_b=6))
    assert output.tokens.shape[:2] == (2, 2)
    # Every hypothesis ends in </s> within the length limit.
    lengths = output.lengths.numpy()
    assert np.all((lengths >= 1) & (lengths <= 6 + 1))
