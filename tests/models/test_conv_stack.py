"""Tests of `ConvStack`: embeddings, residual choice, and the checkpoint layout.

Checkpoints written before `ConvBlock` restore into today's model, number for number:
`tests/fixtures/checkpoint_v1/` was written by the code of commit 84e43e0 (see its
`generate.py`): a small model with residual projections, residual distances 2 and 0 and
attention on two of four decoder blocks, its logits and its incremental decoding.
"""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers.layer_test import run_layer_test

from convs2s_tf.models import ConvS2S, ConvStack

FIXTURE = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "checkpoint_v1"
)
MODEL_CHECKPOINT = os.path.join(FIXTURE, "model", "ckpt-1")
TRAINING_CHECKPOINT = os.path.join(FIXTURE, "training", "ckpt-1")


def _run_stack(stack, tokens):
    def apply_block(index, block, x, residual):
        return block(x, residual=residual)

    return stack.run_blocks(stack.input_projection(stack.embed(tokens)), apply_block)


def test_layer_contract():
    # A base layer without `call`: it runs through `embed`, `input_projection` and
    # `run_blocks`. 14 = 2 embeddings + 3 input projection + 3 + 6 (with the 8 -> 12
    # residual projection) for the blocks.
    run_layer_test(
        ConvStack,
        {"vocab_size": 13, "embed_dim": 6, "layers": "[(8, 3), (12, 2)]"},
        tf.constant([[5, 6, 7, 2], [1, 8, 9, 2]]),
        call_fn=_run_stack,
        expected_output_shape=(2, 4, 12),
        expected_num_trainable_weights=14,
        expected_num_non_trainable_variables=1,  # the shared dropout's seed state
        mixed_precision_output_dtype="bfloat16",
    )


def test_stack_picks_residuals_by_distance_and_names_checkpoint_layers(tmp_path):
    stack = ConvStack(
        vocab_size=20,
        embed_dim=6,
        layers="[(6, 3), (8, 2), (8, 1, 2), (8, 3, 0)]",
        padding="causal",
        attention=[False, True, False, False],
    )
    stack.build()
    assert [block.residual_channels for block in stack.blocks[:3]] == [6, 6, 6]
    assert [block.projection is not None for block in stack.blocks] == [False, True, True, False]
    assert all(block.dropout_layer is stack.dropout_layer for block in stack.blocks)
    seen = []
    stack.run_blocks("x", lambda index, block, x, residual: seen.append(residual) or index)
    # Block 2 (distance 2) gets block 1's input (block 0's output); block 3 none.
    assert seen == ["x", 0, 0, None]
    path = tf.train.Checkpoint(stack=stack).save(str(tmp_path / "ckpt"))
    names = {name.split("/")[1] for name, _ in tf.train.list_variables(path) if "/" in name}
    assert {"projection_1", "projection_2", "attention_1", "convolution_3"} <= names
    assert not any(name.startswith("block") for name in names)
    assert ConvStack.from_config(stack.get_config()).get_config() == stack.get_config()


# ---- Checkpoints from before `ConvBlock` (tests/fixtures/checkpoint_v1/) ----


@pytest.fixture(scope="module")
def expected():
    return dict(np.load(os.path.join(FIXTURE, "expected.npz")))


def fresh_model():
    with open(os.path.join(FIXTURE, "config.json"), encoding="utf-8") as f:
        model = ConvS2S(**json.load(f))
    model(model.dummy_inputs())
    return model


@pytest.fixture(scope="module")
def restored():
    model = fresh_model()
    status = tf.train.Checkpoint(model=model).restore(MODEL_CHECKPOINT)
    status.assert_existing_objects_matched()
    status.assert_consumed()
    return model


def incremental(model, tokens_per_step, source, beam_size):
    encoder_output = model.encode(tf.constant(source))
    state = model.decoder.initial_state(tokens_per_step.shape[1])
    logits, attention = [], []
    for step, tokens in enumerate(tokens_per_step):
        step_logits, step_attention, state = model.decoder.step(
            tf.constant(tokens), step, state, encoder_output, beam_size=beam_size
        )
        logits.append(step_logits.numpy())
        attention.append(step_attention.numpy())
    return np.stack(logits, 1), np.stack(attention, 1)


def test_old_checkpoint_gives_the_same_logits(restored, expected):
    inputs = {"source": expected["source"], "target_input": expected["target_input"]}
    logits, attention = restored(inputs, return_attention=True)
    np.testing.assert_allclose(logits.numpy(), expected["logits"], rtol=0, atol=1e-6)
    np.testing.assert_allclose(attention.numpy(), expected["attention"], rtol=0, atol=1e-6)


@pytest.mark.parametrize("beam_size", [1, 2])
def test_old_checkpoint_gives_the_same_incremental_decoding(restored, expected, beam_size):
    tokens = expected["target_input"].T if beam_size == 1 else expected["beam_tokens"]
    prefix = "step" if beam_size == 1 else "beam"
    logits, attention = incremental(restored, tokens, expected["source"], beam_size)
    np.testing.assert_allclose(logits, expected[f"{prefix}_logits"], rtol=0, atol=1e-6)
    np.testing.assert_allclose(attention, expected[f"{prefix}_attention"], rtol=0, atol=1e-6)


def test_new_checkpoints_keep_the_old_layout(tmp_path):
    path = tf.train.Checkpoint(model=fresh_model()).save(str(tmp_path / "ckpt"))
    assert dict(tf.train.list_variables(path)) == dict(tf.train.list_variables(MODEL_CHECKPOINT))


def test_old_training_checkpoint_keeps_optimizer_slots_on_their_variables():
    # The optimizer stores its variables by position in `trainable_variables`: a changed
    # order would pair momenta (and the variables themselves) with the wrong weights.
    model = fresh_model()
    optimizer = keras.optimizers.SGD(learning_rate=0.25, momentum=0.99, nesterov=True)
    optimizer.build(model.trainable_variables)
    status = tf.train.Checkpoint(model=model, optimizer=optimizer).restore(TRAINING_CHECKPOINT)
    status.assert_existing_objects_matched()
    status.assert_consumed()
    for index, variable in enumerate(model.trainable_variables):
        stored = tf.train.load_variable(
            TRAINING_CHECKPOINT,
            f"optimizer/_trainable_variables/{index}/.ATTRIBUTES/VARIABLE_VALUE",
        )
        np.testing.assert_array_equal(variable.numpy(), stored, err_msg=variable.path)
    momenta = [v for v in optimizer.variables if v.shape.rank]
    assert len(momenta) == len(model.trainable_variables)
    for momentum, variable in zip(momenta, model.trainable_variables):
        assert momentum.shape == variable.shape
        assert np.any(momentum.numpy() != 0.0)
