"""Learning-rate warm-ups: the factor of the run's rate at each update.

The run's learning rate (`TrainingState.learning_rate`, shrunk on plateaus) is the
peak; an update's rate is that times `warmup_factor(kind, step, warmup_steps)` of its
0-based update number `step`:

- `"none"`: 1 (the authors' NAG recipe);
- `"exponential"`: `0.01 ** ((warmup_steps - step) / warmup_steps)` before
  `warmup_steps`, then 1 (tensor2tensor 1.2.2's warm-up, SliceNet's recipe);
- `"noam"`: `min((step + 1) / warmup_steps, sqrt(warmup_steps / (step + 1)))`, the
  Transformer's inverse-square-root schedule scaled to peak at 1 at `warmup_steps`
  (tensor2tensor's `5000 * d ** -0.5` constant is the peak rate's business here).
"""

import tensorflow as tf

WARMUPS = ("none", "exponential", "noam")


def warmup_factor(kind: str, step: tf.Tensor | int, warmup_steps: int) -> tf.Tensor:
    """Returns the float32 factor of the peak rate at 0-based update `step`.

    Raises:
        ValueError: for an unknown `kind` or `warmup_steps` < 1.
    """
    if kind not in WARMUPS:
        raise ValueError(f"warmup must be one of {WARMUPS}, got {kind!r}.")
    if warmup_steps < 1:
        raise ValueError(f"warmup_steps must be >= 1, got {warmup_steps}.")
    step = tf.cast(step, tf.float32)
    warmup = float(warmup_steps)
    if kind == "exponential":
        return tf.where(step < warmup, tf.pow(0.01, (warmup - step) / warmup), 1.0)
    if kind == "noam":
        return tf.minimum((step + 1.0) / warmup, tf.sqrt(warmup / (step + 1.0)))
    return tf.constant(1.0)
