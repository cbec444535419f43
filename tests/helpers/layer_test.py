"""One test of the contract every Keras layer of the library keeps.

Modelled on keras-hub's `TestCase.run_layer_test`: a layer test module calls
`run_layer_test` once per layer configuration worth checking, and keeps its own tests
for what is particular to the layer (its arithmetic, its initialisation).
"""

import json

import keras
import numpy as np
import tensorflow as tf


def run_layer_test(
    cls,
    init_kwargs,
    input_data,
    expected_output_shape,
    *,
    call_kwargs=None,
    call_fn=None,
    build_shape="from_input",
    expected_output_dtype=None,
    expected_num_trainable_weights=0,
    expected_num_non_trainable_variables=0,
    initial_state_fn=None,
    step_fn=None,
    step_atol=1e-5,
    mixed_precision_output_dtype=None,
):
    """Checks a layer's build, outputs, config and serialisation, gradients and `step`.

    1. `get_config` -> `from_config` and `keras.saving` serialisation (through JSON)
       give the same config, before the layer is built.
    2. `build(build_shape)` creates the expected numbers of trainable weights and
       non-trainable variables; so does building on the first call.
    3. The outputs have the expected shapes (and `compute_output_shape` agrees, when the
       layer defines it) and their floating-point parts the expected dtype.
    4. A clone from `get_config` and a copy through `keras.saving` serialisation, given
       the layer's weights, compute the same outputs.
    5. Every trainable weight gets a gradient from the outputs.
    6. With `step_fn`: stepping position by position equals the parallel call.
    7. With `mixed_precision_output_dtype`: under the global `"mixed_bfloat16"` policy
       the variables stay float32, every sublayer computes in bfloat16 and the
       floating-point outputs have the dtype(s) given.

    Args:
        cls: The layer class.
        init_kwargs: Constructor arguments.
        input_data: The call's input, or a list or tuple of its positional inputs.
        expected_output_shape: The output's shape as a tuple, or for several outputs a
            tuple of those (None for an output that is None).
        call_kwargs: Keyword arguments of every call (e.g. `training=False`).
        call_fn: `call_fn(layer, *inputs, **call_kwargs)` computes the outputs, for a
            layer used through methods other than `__call__` (default: calls the layer).
        build_shape: The argument of `build`; by default the shape of the first input.
        expected_output_dtype: The dtype of every floating-point output, or a structure
            like the outputs' (None entries unchecked); default the compute dtype.
        expected_num_trainable_weights: `len(layer.trainable_weights)` once built.
        expected_num_non_trainable_variables: `len(layer.non_trainable_variables)`
            (seed generator states included).
        initial_state_fn: `initial_state_fn(layer)`, the state before the first step.
        step_fn: `step_fn(layer, t, state) -> (output_t, state)` decodes position `t`;
            `output_t` must equal the first output's `[:, t]`.
        step_atol: Absolute tolerance of the step check.
        mixed_precision_output_dtype: The floating-point outputs' dtype(s) under the
            global `"mixed_bfloat16"` policy (as `expected_output_dtype`); None skips
            the check.

    Returns:
        The outputs of the built layer (for further checks by the caller).
    """
    inputs = list(input_data) if type(input_data) in (list, tuple) else [input_data]
    call_kwargs = dict(call_kwargs or {})
    if build_shape == "from_input":
        build_shape = _shape(inputs[0]) if hasattr(inputs[0], "shape") else None

    def run(layer):
        if call_fn is not None:
            return call_fn(layer, *inputs, **call_kwargs)
        return layer(*inputs, **call_kwargs)

    run_serialization_test(cls(**init_kwargs))

    layer = cls(**init_kwargs)
    layer.build(build_shape)
    assert layer.built
    _check_variable_counts(
        layer, expected_num_trainable_weights, expected_num_non_trainable_variables
    )
    outputs = run(layer)
    assert _shapes(outputs) == expected_output_shape, "unexpected output shape"
    _check_dtypes(outputs, expected_output_dtype or layer.compute_dtype)
    if build_shape is not None and _defines_compute_output_shape(layer) and _is_tensor(outputs):
        assert tuple(layer.compute_output_shape(build_shape)) == expected_output_shape

    if call_fn is None:
        lazily_built = cls(**init_kwargs)
        run(lazily_built)
        _check_variable_counts(
            lazily_built, expected_num_trainable_weights, expected_num_non_trainable_variables
        )

    serialized = json.loads(json.dumps(keras.saving.serialize_keras_object(layer)))
    for revived in (cls.from_config(layer.get_config()), _deserialize(serialized)):
        if not revived.built:
            revived.build(build_shape)
        revived.set_weights(layer.get_weights())
        _assert_same_outputs(run(revived), outputs)

    if layer.trainable_weights:
        _check_gradients_reach_every_weight(layer, run)

    if step_fn is not None:
        _check_steps(layer, outputs, initial_state_fn, step_fn, step_atol)

    if mixed_precision_output_dtype is not None:
        _check_mixed_precision(cls, init_kwargs, run, mixed_precision_output_dtype)
    return outputs


def run_serialization_test(instance):
    """`get_config` -> `from_config` and `keras.saving` serialisation through JSON give
    back the same config and class (for layers, initializers, optimizers...)."""
    config_json = json.dumps(instance.get_config(), sort_keys=True)
    clone = type(instance).from_config(instance.get_config())
    assert json.dumps(clone.get_config(), sort_keys=True) == config_json
    serialized = json.loads(json.dumps(keras.saving.serialize_keras_object(instance)))
    restored = _deserialize(serialized)
    assert type(restored) is type(instance)
    assert json.dumps(restored.get_config(), sort_keys=True) == config_json


def _deserialize(serialized):
    return keras.saving.deserialize_keras_object(serialized)


def _shape(x):
    return tuple(x.shape)


def _is_tensor(x):
    return hasattr(x, "shape") and hasattr(x, "dtype")


def _shapes(outputs):
    if outputs is None:
        return None
    if isinstance(outputs, (list, tuple)):
        return tuple(_shapes(output) for output in outputs)
    return _shape(outputs)


def _floating_dtypes(outputs):
    """The dtype names of the floating-point outputs (None for the others), flattened."""
    return [
        tf.as_dtype(output.dtype).name if tf.as_dtype(output.dtype).is_floating else None
        for output in tf.nest.flatten(outputs)
        if output is not None
    ]


def _check_dtypes(outputs, expected):
    actual = _floating_dtypes(outputs)
    if isinstance(expected, str):
        expected = [None if dtype is None else expected for dtype in actual]
    else:
        expected = [dtype for dtype in tf.nest.flatten(expected)]
    assert len(actual) == len(expected), (actual, expected)
    for got, wanted in zip(actual, expected):
        if wanted is not None:
            assert got == wanted, f"unexpected output dtypes {actual}, expected {expected}"


def _check_variable_counts(layer, trainable, non_trainable):
    assert len(layer.trainable_weights) == trainable, [w.path for w in layer.trainable_weights]
    assert len(layer.non_trainable_variables) == non_trainable, [
        v.path for v in layer.non_trainable_variables
    ]


def _defines_compute_output_shape(layer):
    return type(layer).compute_output_shape is not keras.layers.Layer.compute_output_shape


def _assert_same_outputs(actual, expected):
    for got, wanted in zip(tf.nest.flatten(actual), tf.nest.flatten(expected)):
        if wanted is None:
            assert got is None
        else:
            np.testing.assert_allclose(np.asarray(got), np.asarray(wanted), rtol=1e-6, atol=1e-6)


def _check_gradients_reach_every_weight(layer, run):
    with tf.GradientTape() as tape:
        outputs = run(layer)
        floating = [
            tf.cast(output, tf.float32)
            for output in tf.nest.flatten(outputs)
            if output is not None and tf.as_dtype(output.dtype).is_floating
        ]
        loss = tf.add_n([tf.reduce_sum(tf.square(output)) for output in floating])
    gradients = tape.gradient(loss, layer.trainable_weights)
    unused = [w.path for w, g in zip(layer.trainable_weights, gradients) if g is None]
    assert not unused, f"no gradient reaches {unused}"


def _check_steps(layer, outputs, initial_state_fn, step_fn, atol):
    parallel = np.asarray(tf.nest.flatten(outputs)[0])
    state = initial_state_fn(layer) if initial_state_fn is not None else None
    for t in range(parallel.shape[1]):
        output_t, state = step_fn(layer, t, state)
        np.testing.assert_allclose(
            np.reshape(np.asarray(output_t), parallel[:, t].shape),
            parallel[:, t],
            atol=atol,
            err_msg=f"step {t} differs from the parallel call",
        )


def _check_mixed_precision(cls, init_kwargs, run, expected):
    # As training and bfloat16 inference set it: the global policy, which the layers a
    # layer creates inherit.
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        layer = cls(**init_kwargs)
        outputs = run(layer)
    finally:
        keras.config.set_dtype_policy(previous)
    _check_dtypes(outputs, expected)
    for variable in layer.weights:
        assert variable.dtype == "float32", variable.path
    for sublayer in layer._flatten_layers(include_self=True, recursive=True):
        assert sublayer.compute_dtype == "bfloat16", sublayer.name
        assert sublayer.variable_dtype == "float32", sublayer.name
