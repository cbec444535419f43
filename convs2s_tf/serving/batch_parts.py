"""A request's batch searched in parts of a bounded number of rows, so that a cancelled
or timed-out request stops between parts instead of running to its end.

TensorFlow cannot interrupt a running function: a 1,024-sentence search is seconds of
work that nothing stops once it has begun. Split into parts, the check between parts
ends the request within one part's time. Translations do not depend on their batch
mates (the search is batch-independent), so the joined parts answer exactly as the
whole batch would.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import tensorflow as tf

# What the exports put beyond a row's end in their variable-width outputs (the same as
# a whole-batch search leaves there): `<pad>` ids and pieces, zero attention.
OUTPUT_PADDING: dict[str, Any] = {
    "output_ids": 1,
    "source_pieces": b"<pad>",
    "target_pieces": b"<pad>",
    "attention": 0.0,
    "block_attention": 0.0,
}


def predict_in_parts(
    function: Callable[..., Mapping[str, tf.Tensor]],
    inputs: Mapping[str, np.ndarray],
    dtypes: Mapping[str, tf.DType],
    part_size: int,
    before_part: Callable[[], None] = lambda: None,
) -> dict[str, np.ndarray]:
    """`function(**inputs)` for batch-major `inputs`, run on parts of at most `part_size`
    rows and joined in order.

    Args:
        function: A signature taking and returning tensors whose first dimension is the
            batch.
        inputs: The request's arrays by input name, all with the same number of rows.
        dtypes: The signature's dtype of each input.
        part_size: Rows per part (>= 1).
        before_part: Called before each part; raises to stop the request there.

    Returns:
        The outputs by name as numpy arrays; variable-width outputs of different parts
        padded to the widest with `OUTPUT_PADDING`.

    Raises:
        ValueError: Parts of an output differ in shape and `OUTPUT_PADDING` has no value
            for it.
    """
    if part_size < 1:
        raise ValueError(f"part_size must be >= 1, got {part_size}.")
    rows = min((len(value) for value in inputs.values()), default=0)
    parts = []
    for start in range(0, max(rows, 1), part_size):
        before_part()
        part = {
            key: tf.constant(value[start : start + part_size], dtype=dtypes[key])
            for key, value in inputs.items()
        }
        parts.append({key: np.asarray(value) for key, value in function(**part).items()})
    if len(parts) == 1:
        return parts[0]
    return {key: _joined(key, [part[key] for part in parts]) for key in parts[0]}


def _joined(key: str, arrays: list[np.ndarray]) -> np.ndarray:
    width = np.max([array.shape[1:] for array in arrays], axis=0) if arrays[0].ndim > 1 else []
    padded = []
    for array in arrays:
        missing = [(0, 0)] + [(0, int(w - n)) for w, n in zip(width, array.shape[1:])]
        if any(after for _, after in missing):
            if key not in OUTPUT_PADDING:
                raise ValueError(f"Output {key!r} differs in shape between parts of a batch.")
            array = np.pad(array, missing, constant_values=OUTPUT_PADDING[key])
        padded.append(array)
    return np.concatenate(padded)
