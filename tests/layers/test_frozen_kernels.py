"""Tests of `frozen_kernels`: one kernel tensor per weight-normalised layer in a block."""

import numpy as np
import pytest
import tensorflow as tf
from helpers.search_models import tiny_model

from convs2s_tf.layers import fold_kernels, frozen_kernels, weight_norm_layers
from convs2s_tf.layers.frozen_kernels import foldable_layers, frozen_kernel_of

SOURCE = tf.constant([[5, 6, 7, 2], [1, 1, 8, 2]])


def test_frozen_kernels_compute_the_same_and_check_shapes():
    model = tiny_model(target_vocab_size=9, seed=13)
    inputs = {"source": SOURCE, "target_input": tf.constant([[2, 4, 5], [2, 6, 7]])}
    expected = model(inputs)
    kernels = fold_kernels(model)
    with frozen_kernels(model, kernels):
        frozen = model(inputs)
        assert all(frozen_kernel_of(layer) is not None for layer in weight_norm_layers(model))
    assert all(frozen_kernel_of(layer) is None for layer in weight_norm_layers(model))
    np.testing.assert_allclose(frozen.numpy(), expected.numpy(), atol=1e-6)
    with pytest.raises(ValueError, match="kernels given for"):
        with frozen_kernels(model, kernels[:-1]):
            pass
    with pytest.raises(ValueError, match="Kernel of shape"):
        with frozen_kernels(model, kernels[1:] + kernels[:1]):
            pass


def test_a_shared_output_table_is_folded_transposed_and_computes_the_same():
    model = tiny_model(target_vocab_size=9, seed=5, share_decoder_input_output_embed=True)
    decoder = model.decoder
    inputs = {"source": SOURCE, "target_input": tf.constant([[2, 4, 5], [2, 6, 7]])}
    expected = model(inputs)
    kernels = fold_kernels(model)
    assert len(kernels) == len(weight_norm_layers(model)) + 1
    table = decoder.token_embedding.embeddings.numpy()
    (folded,) = [k for k, layer in zip(kernels, foldable_layers(model)) if layer is decoder]
    np.testing.assert_array_equal(folded.numpy(), table.T)
    with frozen_kernels(model, kernels):
        assert frozen_kernel_of(decoder) is not None
        frozen = model(inputs)
    assert frozen_kernel_of(decoder) is None
    np.testing.assert_allclose(frozen.numpy(), expected.numpy(), atol=1e-6)


def test_frozen_kernels_belong_to_the_thread_that_froze_them():
    import threading

    model = tiny_model(target_vocab_size=9, seed=13)
    layer = weight_norm_layers(model)[0]
    seen = []
    with frozen_kernels(model):
        worker = threading.Thread(target=lambda: seen.append(frozen_kernel_of(layer)))
        worker.start()
        worker.join()
        assert frozen_kernel_of(layer) is not None
    assert seen == [None]
