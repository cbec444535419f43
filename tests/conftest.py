"""Shared fixtures and helpers for the test suite."""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import keras  # noqa: E402


def randomize_weights(model, seed=0, scale=0.3):
    """Gives every float variable random values (biases and gains included).

    At construction biases are zero and gains equal the norms, which can hide a missing
    mask or a wrong residual; tests of structural rules run on random weights instead.
    """
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        if variable.dtype not in ("float32", "float64") or not variable.trainable:
            continue
        values = rng.normal(0.0, scale, size=variable.shape).astype(variable.dtype)
        if variable.path.endswith("kernel_g"):
            values = np.abs(values) + 0.5
        variable.assign(values)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture(autouse=True)
def _seed():
    keras.utils.set_random_seed(0)
    yield
