"""Tests of `ConvStack`: embeddings, residual choice, and the checkpoint layout."""

import keras
import numpy as np
import tensorflow as tf
from helpers.layer_test import run_layer_test

from convs2s_tf.models import ConvS2S, ConvStack

# Residual projections, residual distances 2 and 0, attention on two of four decoder blocks.
MODEL_CONFIG = {
    "source_vocab_size": 23,
    "target_vocab_size": 29,
    "embed_dim": 6,
    "encoder_layers": "[(6, 3), (6, 3), (8, 2, 2), (8, 5, 0)]",
    "decoder_layers": "[(6, 3), (8, 2), (8, 1, 2), (6, 5)]",
    "decoder_attention": [True, False, True, False],
    "decoder_out_embed_dim": 7,
    "max_source_positions": 16,
    "max_target_positions": 16,
    "pad_id": 1,
    "share_decoder_input_output_embed": False,
}


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


def fresh_model():
    model = ConvS2S(**MODEL_CONFIG)
    model(model.dummy_inputs())
    return model


def _inputs():
    return {
        "source": tf.constant([[5, 6, 7, 2], [8, 9, 2, 1]]),
        "target_input": tf.constant([[2, 10, 11], [2, 12, 1]]),
    }


def test_training_checkpoint_restores_model_and_optimizer_slots(tmp_path):
    # The optimizer stores its variables by position in `trainable_variables`: a restore
    # must pair every momentum (and every variable) with the weight it was saved for.
    def trained():
        model = fresh_model()
        optimizer = keras.optimizers.SGD(learning_rate=0.25, momentum=0.99, nesterov=True)
        optimizer.build(model.trainable_variables)
        return model, optimizer

    model, optimizer = trained()
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(_inputs())))
    optimizer.apply_gradients(
        zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
    )
    path = tf.train.Checkpoint(model=model, optimizer=optimizer).save(str(tmp_path / "ckpt"))

    restored, restored_optimizer = trained()
    status = tf.train.Checkpoint(model=restored, optimizer=restored_optimizer).restore(path)
    status.assert_existing_objects_matched()
    status.assert_consumed()
    np.testing.assert_array_equal(restored(_inputs()).numpy(), model(_inputs()).numpy())
    momenta = [v for v in restored_optimizer.variables if v.shape.rank]
    saved_momenta = [v for v in optimizer.variables if v.shape.rank]
    assert len(momenta) == len(restored.trainable_variables)
    for momentum, saved, variable in zip(momenta, saved_momenta, restored.trainable_variables):
        assert momentum.shape == variable.shape
        np.testing.assert_array_equal(momentum.numpy(), saved.numpy(), err_msg=variable.path)
        assert np.any(momentum.numpy() != 0.0)
