"""Hyperparameters of a training run."""

from __future__ import annotations

import dataclasses

from convs2s_tf.training.warmup import WARMUPS


@dataclasses.dataclass
class TrainingConfig:
    """How to train; the defaults are the paper's (section 4.2).

    Attributes:
        optimizer: "nag" (Nesterov SGD, the paper's) or "adam" (Adam, AdamW with
            `weight_decay`: the Transformer's and SliceNet's).
        learning_rate: Initial (peak) learning rate.
        momentum: Nesterov momentum.
        adam_beta1: Adam's first-moment decay.
        adam_beta2: Adam's second-moment decay.
        adam_epsilon: Adam's epsilon.
        weight_decay: Decoupled weight decay per update, times the rate (0: none).
        warmup: The learning rate's warm-up: "none", "exponential" or "noam"
            (`convs2s_tf.training.warmup`).
        warmup_steps: Updates of the warm-up.
        clip_norm: Gradients are renormalised when their global norm exceeds this
            (0 disables).
        label_smoothing: Label smoothing `eps`.
        lr_shrink: Factor applied to the learning rate after an epoch whose validation
            loss did not improve (see `PlateauSchedule`).
        lr_threshold: Relative validation-loss improvement that counts as one.
        lr_patience: Epochs without improvement tolerated before a shrink.
        min_learning_rate: Training stops once the learning rate is at or below this.
        max_epochs: Stop after this many epochs (0: no limit).
        max_steps: Stop after this many updates (0: no limit).
        update_freq: Micro-batches accumulated per update (emulates larger batches).
        save_every_steps: Write a checkpoint every this many updates (0: epoch ends only).
        keep_checkpoints: Recent checkpoints kept (the best one is kept separately).
        average_last_n: When training ends, average the model weights of the last this
            many epoch ends (kept apart from the recent checkpoints for it) into the
            run's `averaged/`, which the test score and inference then use (0: off).
        max_nonfinite_steps: Consecutive NaN/inf losses tolerated before stopping.
        log_every_steps: TensorBoard scalar interval, in updates.
        valid_beam_size: Beam width for validation BLEU (0 skips BLEU).
        valid_bleu_sentences: Validation sentences decoded for BLEU (0: all).
        attention_sentences: Fixed validation sentences whose attention is plotted.
        sample_sentences: Validation translations shown next to references.
        dtype: Compute dtype: "float32", "bfloat16" (bfloat16 matrix products with
            float32 variables and loss) or "float16" (the same in float16, with dynamic
            loss scaling: for GPUs without bfloat16).
        xla: XLA-compile the training step.
        progress_bar: Show a console progress bar.
        seed: Seed of initialisation, dropout and shuffling.
    """

    optimizer: str = "nag"
    learning_rate: float = 0.25
    momentum: float = 0.99
    adam_beta1: float = 0.9
    adam_beta2: float = 0.98
    adam_epsilon: float = 1e-8
    weight_decay: float = 0.0
    warmup: str = "none"
    warmup_steps: int = 4000
    clip_norm: float = 0.1
    label_smoothing: float = 0.1
    lr_shrink: float = 0.1
    lr_threshold: float = 1e-4
    lr_patience: int = 0
    min_learning_rate: float = 1e-4
    max_epochs: int = 0
    max_steps: int = 0
    update_freq: int = 1
    save_every_steps: int = 1000
    keep_checkpoints: int = 3
    average_last_n: int = 0
    max_nonfinite_steps: int = 5
    log_every_steps: int = 100
    valid_beam_size: int = 5
    valid_bleu_sentences: int = 0
    attention_sentences: int = 3
    sample_sentences: int = 5
    dtype: str = "float32"
    xla: bool = False
    progress_bar: bool = True
    seed: int = 1

    def validate(self) -> TrainingConfig:
        """Raises ValueError naming the first inconsistent field."""
        checks = [
            (self.optimizer in ("nag", "adam"), "optimizer must be nag or adam"),
            (self.learning_rate > 0, "learning_rate must be positive"),
            (
                0 <= self.adam_beta1 < 1 and 0 <= self.adam_beta2 < 1,
                "adam_beta1 and adam_beta2 must be in [0, 1)",
            ),
            (self.adam_epsilon > 0, "adam_epsilon must be positive"),
            (self.weight_decay >= 0, "weight_decay must be >= 0"),
            (self.warmup in WARMUPS, f"warmup must be one of {', '.join(WARMUPS)}"),
            (self.warmup_steps >= 1, "warmup_steps must be >= 1"),
            (0 <= self.momentum < 1, "momentum must be in [0, 1)"),
            (self.clip_norm >= 0, "clip_norm must be >= 0"),
            (0 <= self.label_smoothing < 1, "label_smoothing must be in [0, 1)"),
            (0 < self.lr_shrink < 1, "lr_shrink must be in (0, 1)"),
            (0 <= self.lr_threshold < 1, "lr_threshold must be in [0, 1)"),
            (self.lr_patience >= 0, "lr_patience must be >= 0"),
            (
                self.dtype in ("float32", "bfloat16", "float16"),
                "dtype must be float32, bfloat16 or float16",
            ),
            (self.min_learning_rate >= 0, "min_learning_rate must be >= 0"),
            (
                self.min_learning_rate < self.learning_rate,
                f"min_learning_rate={self.min_learning_rate} must be below "
                f"learning_rate={self.learning_rate}, or training would stop at once",
            ),
            (self.max_epochs >= 0 and self.max_steps >= 0, "max_epochs/max_steps must be >= 0"),
            (self.update_freq >= 1, "update_freq must be >= 1"),
            (self.save_every_steps >= 0, "save_every_steps must be >= 0"),
            (self.keep_checkpoints >= 1, "keep_checkpoints must be >= 1"),
            (self.average_last_n >= 0, "average_last_n must be >= 0"),
            (self.max_nonfinite_steps >= 1, "max_nonfinite_steps must be >= 1"),
            (self.valid_beam_size >= 0, "valid_beam_size must be >= 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message + ".")
        return self
