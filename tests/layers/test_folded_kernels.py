"""Tests of `FoldedKernels`: one kernel per foldable layer, passed to the layers' calls."""

import threading

import numpy as np
import pytest
import tensorflow as tf
from helpers.search_models import tiny_model

from convs2s_tf.decoding import make_inference_model
from convs2s_tf.layers import FoldedKernels, Int8Kernel, fold_kernels, weight_norm_layers
from convs2s_tf.layers.folded_kernels import foldable_layers

SOURCE = tf.constant([[5, 6, 7, 2], [1, 1, 8, 2]])
TOKENS = tf.constant([2, 4, 5, 6])


def _first_step(model, kernels=None):
    """The encoder output's keys and the first step's logits, with `kernels` or not."""
    encoded = model.encode(SOURCE, kernels=kernels)
    state = model.decoder.initial_state(4)
    logits, _, _ = model.decoder.step(
        TOKENS, 0, state, encoded, beam_size=2, output_subset=None, kernels=kernels
    )
    return encoded.keys.numpy(), logits.numpy()


def test_folded_kernels_compute_the_same_and_check_shapes():
    model = tiny_model(target_vocab_size=9, seed=13)
    kernels = fold_kernels(model)
    folded = FoldedKernels.of(model, kernels)
    assert len(folded) == len(weight_norm_layers(model))
    assert all(folded.kernel(layer) is not None for layer in weight_norm_layers(model))
    expected_keys, expected_logits = _first_step(model)
    keys, logits = _first_step(model, folded)
    np.testing.assert_allclose(keys, expected_keys, atol=1e-6)
    np.testing.assert_allclose(logits, expected_logits, atol=1e-5)
    with pytest.raises(ValueError, match="kernels given for"):
        FoldedKernels.of(model, kernels[:-1])
    with pytest.raises(ValueError, match="Kernel of shape"):
        FoldedKernels.of(model, kernels[1:] + kernels[:1])


def test_the_layers_compute_with_the_kernels_they_are_given():
    model = tiny_model(target_vocab_size=9, seed=13)
    layers = foldable_layers(model)
    zeros = FoldedKernels(layers, [tf.zeros_like(kernel) for kernel in fold_kernels(model)])
    _, logits = _first_step(model, zeros)
    # Every map is zero but the biases: the logits are the output bias alone.
    bias = model.decoder.output_projection.bias.numpy()
    np.testing.assert_allclose(logits, np.broadcast_to(bias, logits.shape), atol=1e-6)


def test_a_shared_output_table_is_folded_transposed_and_computes_the_same():
    model = tiny_model(target_vocab_size=9, seed=5, share_decoder_input_output_embed=True)
    decoder = model.decoder
    kernels = fold_kernels(model)
    assert len(kernels) == len(weight_norm_layers(model)) + 1
    table = decoder.token_embedding.embeddings.numpy()
    (folded,) = [k for k, layer in zip(kernels, foldable_layers(model)) if layer is decoder]
    np.testing.assert_array_equal(folded.numpy(), table.T)
    expected = _first_step(model)[1]
    np.testing.assert_allclose(_first_step(model, FoldedKernels.of(model))[1], expected, atol=1e-5)


def test_int8_kernels_are_read_dequantised_outside_step_products():
    model = tiny_model(target_vocab_size=9, seed=13)
    layer = weight_norm_layers(model)[0]
    quantized = [Int8Kernel.quantize(kernel) for kernel in fold_kernels(model)]
    folded = FoldedKernels.of(model, quantized)
    assert isinstance(folded.kernel(layer), Int8Kernel)
    np.testing.assert_array_equal(
        folded.float_kernel(layer, "float32").numpy(), quantized[0].dequantize().numpy()
    )


def test_foldable_layers_are_every_built_weight_normalised_layer_once():
    model = tiny_model(target_vocab_size=9, seed=13)
    layers = foldable_layers(model)
    assert len({id(layer) for layer in layers}) == len(layers)
    # Two per attention block (in and out), one convolution per block, the input and
    # output projections of both stacks, the decoder's hidden projection.
    blocks = model.encoder.blocks + model.decoder.blocks
    attentions = [block for block in blocks if block.attention is not None]
    residuals = [block for block in blocks if block.projection is not None]
    assert len(layers) == len(blocks) + 2 * len(attentions) + len(residuals) + 5


def test_inference_models_of_two_threads_hold_their_own_kernels():
    model = tiny_model(target_vocab_size=9, seed=13)
    layer = weight_norm_layers(model)[0]
    graphs = {}

    def trace(name):
        @tf.function
        def fold():
            kernel = make_inference_model(model).kernels.kernel(layer)
            graphs[name] = (tf.compat.v1.get_default_graph(), kernel.graph)
            return kernel

        fold()

    workers = [threading.Thread(target=trace, args=(name,)) for name in ("a", "b")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert all(graph is kernel_graph for graph, kernel_graph in graphs.values())
    assert graphs["a"][0] is not graphs["b"][0]
