"""Naming the sub-layers a layer keeps in Python lists for `tf.train.Checkpoint`."""

from __future__ import annotations

from collections.abc import Iterable

import keras


def track_for_checkpoint(
    owner: keras.layers.Layer, named_layers: Iterable[tuple[str, keras.layers.Layer]]
) -> None:
    """Makes each `(name, layer)` a checkpoint dependency of `owner` under `name`.

    Keras tracks the layers in an attribute's list for its own weights, but
    `tf.train.Checkpoint` does not look into Python lists: without this their variables
    would be missing from every checkpoint. The names are the checkpoint's keys, so they
    must never change for a layer that has shipped.

    Example:

    >>> owner = keras.layers.Layer()
    >>> owner.maps = [keras.layers.Dense(2), keras.layers.Dense(3)]
    >>> track_for_checkpoint(owner, [(f"map_{i}", d) for i, d in enumerate(owner.maps)])
    >>> sorted(name for name in owner._trackable_children() if name.startswith("map_"))
    ['map_0', 'map_1']
    """
    for name, layer in named_layers:
        owner._track_trackable(layer, name=name)
