"""Tests of `frozen_kernels`: one kernel tensor per weight-normalised layer in a block."""

import numpy as np
import pytest
import tensorflow as tf
from helpers.search_models import tiny_model

from convs2s_tf.layers import fold_kernels, frozen_kernels, weight_norm_layers
from convs2s_tf.layers.frozen_kernels import frozen_kernel_of

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
