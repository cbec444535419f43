"""Helpers for layers held per block."""


def track_layers(owner, prefix, layers):
    """Assigns `layers` to `owner` as attributes `prefix_0`, `prefix_1`, ...

    Keras 3 layers keep lists of sublayers in wrappers that `tf.train.Checkpoint` does
    not see: a checkpoint would silently miss every variable held only in a list. Each
    layer (or `None`) becomes its own attribute instead; read them back with
    `tracked_layers`.
    """
    for index, layer in enumerate(layers):
        setattr(owner, f"{prefix}_{index}", layer)
    return len(layers)


def tracked_layers(owner, prefix, count):
    """The layers assigned by `track_layers`, in order."""
    return [getattr(owner, f"{prefix}_{index}") for index in range(count)]
