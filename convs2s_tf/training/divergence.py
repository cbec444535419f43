"""Tolerating a few non-finite updates, and stopping when training has diverged."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from absl import logging


class TrainingDivergedError(RuntimeError):
    """Too many consecutive updates with a NaN or infinite loss or gradient."""


class DivergenceGuard:
    """Counts consecutive skipped (non-finite) updates and stops training at a limit.

    The step skips an update whose loss or gradient is not finite; one such update
    (e.g. a bfloat16 overflow) is harmless, many in a row mean training has diverged.

    Args:
        max_nonfinite_steps: Consecutive non-finite updates tolerated.
    """

    def __init__(self, max_nonfinite_steps: int) -> None:
        self.max_nonfinite_steps = max_nonfinite_steps
        self.nonfinite_in_a_row = 0

    def record(self, result: Mapping[str, Any], step: int) -> None:
        """Records an update's `result` (`applied`, `loss`, `gradient_norm`) at `step`.

        Raises:
            TrainingDivergedError: after `max_nonfinite_steps` skipped updates in a row.
        """
        if bool(result["applied"]):
            self.nonfinite_in_a_row = 0
            return
        if float(result.get("loss_scale", 1.0)) > 1.0:
            # float16: an overflow of the scaled gradients; the loss scale was halved.
            logging.info("Step %d: gradients overflowed; update skipped, loss scale halved.", step)
            return
        self.nonfinite_in_a_row += 1
        logging.warning(
            "Step %d: loss %s, gradient norm %s is not finite; update skipped (%d in a row).",
            step,
            float(result["loss"]),
            float(result["gradient_norm"]),
            self.nonfinite_in_a_row,
        )
        if self.nonfinite_in_a_row >= self.max_nonfinite_steps:
            raise TrainingDivergedError(
                f"{self.nonfinite_in_a_row} consecutive updates had a NaN or infinite loss or "
                f"gradient (last at step {step}); training stopped. Lower the learning rate "
                "or clip_norm, or check the data."
            )
