"""Progress of a training epoch: the console bar, token rates and the train scalars."""

import math
import time
from collections.abc import Mapping
from typing import Any

import keras

from convs2s_tf.training.summaries import SummaryLogger


class EpochProgress:
    """Reports the updates of one epoch as they happen.

    Every `log_every_steps` updates the train scalars (loss, perplexity, learning rate,
    gradient norm and the token rate since the last report) go to TensorBoard; the
    console bar, if shown, follows every update.

    Args:
        summaries: The run's `SummaryLogger`.
        log_every_steps: TensorBoard interval, in updates.
        steps_per_epoch: Batches in the epoch, if known (the bar's length).
        show_bar: Whether to show the console progress bar.
    """

    def __init__(
        self,
        summaries: SummaryLogger,
        log_every_steps: int,
        steps_per_epoch: int | None,
        show_bar: bool,
    ) -> None:
        self.summaries = summaries
        self.log_every_steps = log_every_steps
        self.bar = (
            keras.utils.Progbar(
                steps_per_epoch, stateful_metrics=["loss", "tok/s", "lr"], unit_name="batch"
            )
            if show_bar
            else None
        )
        self._epoch_tokens, self._epoch_start = 0.0, time.time()
        self._window_tokens, self._window_start = 0.0, time.time()

    def tokens_per_second(self) -> float:
        """Target tokens per second since the epoch (or its resumed part) began."""
        return self._epoch_tokens / max(time.time() - self._epoch_start, 1e-9)

    def update(
        self, batches: int, step: int, result: Mapping[str, Any], learning_rate: float
    ) -> None:
        """Records one update.

        Args:
            batches: Batches of the epoch consumed so far.
            step: The step count after the update.
            result: The step's result (`loss`, `nll`, `tokens`, `gradient_norm`).
            learning_rate: The current learning rate.
        """
        tokens = float(result["tokens"])
        self._window_tokens += tokens
        self._epoch_tokens += tokens
        if step % self.log_every_steps == 0:
            elapsed = max(time.time() - self._window_start, 1e-9)
            self._log_scalars(step, result, learning_rate, self._window_tokens / elapsed)
            self._window_tokens, self._window_start = 0.0, time.time()
        if self.bar is not None:
            self.bar.update(
                batches,
                values=[
                    ("loss", float(result["loss"])),
                    ("tok/s", round(self.tokens_per_second())),
                    ("lr", learning_rate),
                ],
            )

    def _log_scalars(
        self,
        step: int,
        result: Mapping[str, Any],
        learning_rate: float,
        tokens_per_second: float,
    ) -> None:
        self.summaries.scalars(
            "train",
            step,
            {
                "loss": float(result["loss"]),
                "perplexity": math.exp(min(float(result["nll"]), 50.0)),
                "learning_rate": learning_rate,
                "gradient_norm": float(result["gradient_norm"]),
                "tokens_per_second": tokens_per_second,
            },
        )
