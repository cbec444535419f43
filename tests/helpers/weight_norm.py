"""The weight-normalisation rule both weight-normalised layers keep."""

import numpy as np


def check_weight_norm(layer, inputs, norm_axes, rng):
    """`W = g v / ||v||` (norm over `norm_axes`), `W == v` at construction, and the layer
    computes with `W`."""
    layer(inputs)
    v = layer.kernel_v.numpy()
    # At construction g = ||v||, so the effective weight is v itself.
    np.testing.assert_allclose(layer.kernel.numpy(), v, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(
        layer.kernel_g.numpy(),
        np.sqrt(np.sum(v**2, axis=norm_axes)),
        rtol=1e-6,
    )
    new_g = rng.uniform(0.5, 2.0, size=layer.kernel_g.shape).astype("float32")
    layer.kernel_g.assign(new_g)
    expected = new_g * v / np.sqrt(np.sum(v**2, axis=norm_axes, keepdims=True))
    np.testing.assert_allclose(layer.kernel.numpy(), expected, rtol=1e-5, atol=1e-6)
    # The layer computes with the effective weight.
    outputs = layer(inputs).numpy()
    assert not np.allclose(outputs, 0.0)
