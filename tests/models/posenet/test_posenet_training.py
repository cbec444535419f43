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


def test_bfloat16_filter_gradients_are_as_close_to_float32_as_the_other_kernels(small_prepared):
    """TensorFlow's depthwise filter gradient sums each tap over the batch in the compute
    dtype. On a real batch its bfloat16 gradients stay as close to float32's as the
    pointwise maps' (whose products accumulate in float32), all from the same bfloat16
    activations."""
    import tensorflow as tf

    from convs2s_tf.data.pipeline.evaluation import make_eval_dataset
    from convs2s_tf.data.tokenizer import Tokenizer
    from convs2s_tf.runs import build_model as build_in_dtype

    data = small_prepared.data
    tokenizer = Tokenizer(data.sentencepiece_model_path)
    batch = next(iter(make_eval_dataset(*data.split_paths("test"), tokenizer).dataset))
    config = {
        "family": "posenet",
        "source_vocab_size": tokenizer.vocab_size,
        "target_vocab_size": tokenizer.vocab_size,
        "hidden_dim": 48,
        "encoder_layers": 2,
        "decoder_layers": 2,
        "num_heads": 4,
        "ffn_dim": 96,
        "norm_placement": "pre",
    }
    gradients = {}
    for dtype in ("float32", "bfloat16"):
        tf.keras.utils.set_random_seed(1)
        model = build_in_dtype(config, compute_dtype=dtype)
        with tf.GradientTape() as tape:
            logits = model({"source": batch["source"], "target_input": batch["target_input"]})
            loss = tf.reduce_mean(
                tf.keras.losses.sparse_categorical_crossentropy(
                    batch["target"], tf.cast(logits, tf.float32), from_logits=True
                )
            )
        variables = [v for v in model.trainable_variables if "wise_kernel" in v.path]
        gradients[dtype] = [
            (v.path.rsplit("/", 1)[1], g.numpy())
            for v, g in zip(variables, tape.gradient(loss, variables))
        ]
    errors = {"depthwise_kernel": [], "pointwise_kernel": []}
    for (name, exact), (_, rounded) in zip(gradients["float32"], gradients["bfloat16"]):
        errors[name].append(np.linalg.norm(rounded - exact) / np.linalg.norm(exact))
    depthwise, pointwise = (np.median(errors[name]) for name in errors)
    # A loose bound: without bfloat16 instructions TensorFlow rounds differently (a median
    # of 5.4% on an AVX2-only CPU). The claim is the next line's, against the pointwise maps.
    assert len(errors["depthwise_kernel"]) == 16 and depthwise < 0.1, (depthwise, pointwise)
    assert depthwise < 2 * pointwise, (depthwise, pointwise)
