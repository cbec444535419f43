"""The training step: per-replica gradients, the all-reduce, and the update."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import tensorflow as tf

from convs2s_tf.training.loss_scaling import DynamicLossScale
from convs2s_tf.training.losses import batch_loss_sums
from convs2s_tf.training.training_state import TrainingState
from convs2s_tf.training.warmup import warmup_factor

if TYPE_CHECKING:
    import keras

    from convs2s_tf.training.config import TrainingConfig

_SUM = tf.distribute.ReduceOp.SUM


class TrainingSteps:
    """The `tf.function`s a trainer runs: one update, or micro-batches accumulated into one.

    The loss of a step is summed over the non-pad target tokens of every replica (and
    every accumulated micro-batch) and divided by their global count, so an update does
    not depend on the number of replicas; gradients are all-reduced before they are
    renormalised to the global norm `clip_norm`, and an update whose loss or gradient is
    not finite is skipped (float16: and the loss scale halved). Create it in the
    strategy's scope (the accumulators are variables).

    Args:
        model: the built model.
        optimizer: the built optimiser.
        state: the run's `TrainingState` (its step counts the updates).
        config: the run's `TrainingConfig`.
        strategy: the run's strategy.
        loss_scale: float16's `DynamicLossScale`, else None.
        stop_vote: a scalar variable each replica adds to the step's sums (SIGTERM).

    Example:
        steps = TrainingSteps(model, optimizer, state, config, strategy, None, vote)
        steps.build(distributed_dataset.element_spec)
        result = steps.train_step(next(iterator))  # "loss", "applied", "stop_votes", ...
    """

    def __init__(
        self,
        model: keras.Model,
        optimizer: keras.optimizers.Optimizer,
        state: TrainingState,
        config: TrainingConfig,
        strategy: tf.distribute.Strategy,
        loss_scale: DynamicLossScale | None,
        stop_vote: tf.Variable,
    ) -> None:
        self.model = model
        self.optimizer = optimizer
        self.state = state
        self.config = config
        self.strategy = strategy
        self.loss_scale = loss_scale
        self.stop_vote = stop_vote
        self.accumulators, self.accumulated_sums = self._create_accumulators()
        self.train_step: Any = None
        self.accumulate_step: Any = None
        self.apply_accumulated: Any = None

    @property
    def accumulates(self) -> bool:
        """Whether an update spans several micro-batches (`update_freq` > 1)."""
        return self.accumulators is not None

    # Any: `(list[tf.Variable], tf.Variable)`, or `(None, None)` without accumulation;
    # the methods that read them run only when accumulating, which mypy cannot follow.
    def _create_accumulators(self) -> tuple[Any, Any]:
        """Gradient and loss-sum accumulators when updates span micro-batches, else Nones."""
        if self.config.update_freq == 1:
            return None, None
        gradients = [
            tf.Variable(tf.zeros_like(v), trainable=False, name="accumulated_gradient")
            for v in self.model.trainable_variables
        ]
        return gradients, tf.Variable(tf.zeros([4]), trainable=False)

    def _replica_gradients(self, batch: Any) -> tuple[list[tf.Tensor], tf.Tensor]:
        with tf.GradientTape() as tape:
            loss_sum, nll_sum, tokens = batch_loss_sums(
                self.model,
                batch,
                self.config.label_smoothing,
                training=True,
                # An XLA-compiled step needs shapes known when it compiles.
                static_shapes=self.config.xla,
            )
            # float16: the gradients of the scaled loss, unscaled in `_apply`.
            scaled = loss_sum if self.loss_scale is None else self.loss_scale.scale_loss(loss_sum)
        gradients = tape.gradient(scaled, self.model.trainable_variables)
        gradients = [tf.convert_to_tensor(g) for g in gradients]
        # The 4th sum counts the replicas whose worker was asked to stop (SIGTERM): the
        # step's own all-reduce tells every worker, at no extra cost.
        vote = tf.cast(self.stop_vote, loss_sum.dtype)
        return gradients, tf.stack([loss_sum, nll_sum, tokens, vote])

    def _reduced_gradients(self, batch: Any) -> tuple[list[tf.Tensor], tf.Tensor]:
        gradients, sums = self.strategy.run(self._replica_gradients, args=(batch,))
        gradients = [self.strategy.reduce(_SUM, g, axis=None) for g in gradients]
        return gradients, self.strategy.reduce(_SUM, sums, axis=None)

    def _apply(self, gradients: Sequence[tf.Tensor], sums: tf.Tensor) -> dict[str, tf.Tensor]:
        tokens = tf.maximum(sums[2], 1.0)
        # The per-token mean, the loss scale (float16) and the clipping to `clip_norm`
        # in one scale (one pass over each gradient):
        # `g / (tokens * loss_scale) * min(1, clip_norm / ||g / (tokens * loss_scale)||)`.
        loss_scale = 1.0 if self.loss_scale is None else tf.identity(self.loss_scale.scale)
        gradient_norm = tf.linalg.global_norm(gradients) / (tokens * loss_scale)
        scale = 1.0 / (tokens * loss_scale)
        if self.config.clip_norm:
            scale *= tf.minimum(1.0, self.config.clip_norm / gradient_norm)
        gradients = [g * scale for g in gradients]
        finite = tf.math.is_finite(sums[0]) & tf.math.is_finite(gradient_norm)

        if self.config.warmup != "none":
            # The update's rate: the run's (peak) rate times the warm-up's factor.
            factor = warmup_factor(self.config.warmup, self.state.step, self.config.warmup_steps)
            self.optimizer.learning_rate.assign(self.state.learning_rate * factor)

        def apply() -> tf.Tensor:
            self.optimizer.apply(gradients, self.model.trainable_variables)
            return tf.constant(True)

        applied = tf.cond(finite, apply, lambda: tf.constant(False))
        if self.loss_scale is not None:
            self.loss_scale.update(finite)
        self.state.step.assign_add(1)
        return {
            "loss_scale": loss_scale,
            "loss": sums[0] / tokens,
            "nll": sums[1] / tokens,
            "tokens": sums[2],
            "gradient_norm": gradient_norm,
            "applied": applied,
            "stop_votes": sums[3],
        }

    def _train_step_fn(self, batch: Any) -> dict[str, tf.Tensor]:
        return self._apply(*self._reduced_gradients(batch))

    def _accumulate_fn(self, batch: Any) -> tf.Tensor:
        gradients, sums = self._reduced_gradients(batch)
        for accumulator, gradient in zip(self.accumulators, gradients):
            accumulator.assign_add(gradient)
        self.accumulated_sums.assign_add(sums)
        return sums

    def _apply_accumulated_fn(self) -> dict[str, tf.Tensor]:
        result = self._apply([tf.identity(a) for a in self.accumulators], self.accumulated_sums)
        with tf.control_dependencies(list(result.values())):
            for accumulator in self.accumulators:
                accumulator.assign(tf.zeros_like(accumulator))
            self.accumulated_sums.assign(tf.zeros([4]))
        return result

    def build(self, element_spec: Any) -> None:
        """Traces the step functions for the (distributed) dataset's `element_spec`."""
        jit = self.config.xla
        if self.accumulators is None:
            self.train_step = tf.function(
                self._train_step_fn,
                input_signature=[element_spec],
                jit_compile=jit,
                autograph=False,
            )
        else:
            self.accumulate_step = tf.function(
                self._accumulate_fn,
                input_signature=[element_spec],
                jit_compile=jit,
                autograph=False,
            )
            self.apply_accumulated = tf.function(self._apply_accumulated_fn, autograph=False)
