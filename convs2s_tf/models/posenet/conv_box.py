"""SliceNet's and PoseNet's convolution box: ReLU, mask, separable convolution, norm."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf

from convs2s_tf.layers.checkpoint_tracking import track_for_checkpoint
from convs2s_tf.models.posenet.layer_norm import LayerNorm
from convs2s_tf.models.posenet.separable_conv1d import (
    SeparableConv1D,
    SeparableWeights,
    WindowPosition,
    window_position,
)
from convs2s_tf.models.posenet.step_weights import NormWeights, norm_rows, read_norm

# Each convolution's weights and its norm's, as `ConvBox.step` reads them.
BoxWeights = tuple[tuple[SeparableWeights, NormWeights], ...]


@keras.saving.register_keras_serializable(package="convs2s_tf")
class ConvBox(keras.layers.Layer):
    """A sequence of separable convolutions, each `LayerNorm(conv(mask * ReLU(x)))`.

    tensor2tensor's `conv_block_internal` as SliceNet uses it: before each convolution
    a ReLU and the padding mask (`padding_mask`, `[batch, time]`, 1 at real tokens: padding
    never leaks into real positions), after it a
    layer normalisation (epsilon 1e-6). The convolutions have no bias. With `"causal"`
    padding the box steps one position at a time from one window per convolution
    (`initial_state`, `step`, its weights read once by `read_step_weights`; each window
    keeps its convolution's `window_spans` positions), equal to the parallel call.

    Args:
        filters: Channels of every convolution's output.
        convolutions: `(kernel_size, dilation_rate)` of each convolution, in order.
        padding: `"same"` or `"causal"`.
        groups: Channel groups of the convolutions' pointwise maps: one number for all,
            or one per convolution (SliceNet's separability -2 is `[3, 2]`).
        epsilon: The layer normalisations' epsilon.
        **kwargs: Standard `keras.layers.Layer` arguments.

    Example:

    >>> box = ConvBox(filters=8, convolutions=[(3, 1), (7, 2)], padding="causal")
    >>> box(tf.ones([2, 5, 8])).shape
    TensorShape([2, 5, 8])
    """

    def __init__(
        self,
        filters: int,
        convolutions: Sequence[Sequence[int]],
        padding: str = "same",
        groups: int | Sequence[int] = 1,
        epsilon: float = 1e-6,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not convolutions:
            raise ValueError("A ConvBox needs at least one convolution.")
        self.filters = int(filters)
        self.convolutions = [(int(k), int(r)) for k, r in convolutions]
        self.padding = padding
        self.groups = (
            [int(groups)] * len(self.convolutions)
            if isinstance(groups, int)
            else [int(count) for count in groups]
        )
        if len(self.groups) != len(self.convolutions):
            raise ValueError(
                f"groups {self.groups} must give one count per convolution "
                f"({len(self.convolutions)})."
            )
        self.epsilon = float(epsilon)
        self.convs = [
            SeparableConv1D(
                self.filters,
                k,
                dilation_rate=r,
                padding=padding,
                groups=count,
                name=f"conv_{i}",
            )
            for i, ((k, r), count) in enumerate(zip(self.convolutions, self.groups))
        ]
        self.norms = [
            LayerNorm(epsilon=self.epsilon, name=f"norm_{i}") for i in range(len(self.convs))
        ]
        track_for_checkpoint(
            self,
            [
                (f"{role}_{index}", layer)
                for index, pair in enumerate(zip(self.convs, self.norms))
                for role, layer in zip(("conv", "norm"), pair)
            ],
        )

    def build(self, input_shape: Sequence[int | None]) -> None:
        shape = tuple(input_shape)
        for conv, norm in zip(self.convs, self.norms):
            conv.build(shape)
            shape = shape[:-1] + (self.filters,)
            norm.build(shape)

    def call(
        self, inputs: tf.Tensor, padding_mask: tf.Tensor | None = None, training: bool = False
    ) -> tf.Tensor:
        x = inputs
        for conv, norm in zip(self.convs, self.norms):
            x = tf.nn.relu(x)
            if padding_mask is not None:
                x *= tf.cast(padding_mask, x.dtype)[..., None]
            x = norm(conv(x, training=training), training=training)
        return x

    def initial_state(
        self, batch_size: int | tf.Tensor, channels: int, positions: int | tf.Tensor = 0
    ) -> tuple[tf.Tensor, ...]:
        """Returns one zero window per convolution (the causal padding), with room for
        `positions` positions up to each one's span."""
        widths = [channels] + [self.filters] * (len(self.convs) - 1)
        return tuple(
            conv.initial_window(batch_size, c, positions) for conv, c in zip(self.convs, widths)
        )

    @property
    def window_spans(self) -> tuple[int, ...]:
        """Each convolution's `window_span`: the positions its window keeps."""
        return tuple(conv.window_span for conv in self.convs)

    def read_step_weights(self) -> BoxWeights:
        """The weights `step` computes with: each convolution's and its norm's."""
        return tuple(
            (conv.read_step_weights(), read_norm(norm))
            for conv, norm in zip(self.convs, self.norms)
        )

    def step(
        self,
        inputs: tf.Tensor,
        state: Sequence[tf.Tensor],
        step: int | tf.Tensor,
        weights: BoxWeights | None = None,
        positions: dict[int, WindowPosition] | None = None,
    ) -> tuple[tf.Tensor, tuple[tf.Tensor, ...]]:
        """Returns `(output, state)` of causal position `step` (`inputs`: `[batch, c]`;
        `state`: the windows, grown to hold it; `weights`: `read_step_weights()`, or
        None: read now; `positions`: the step's `WindowPosition` by span, shared by the
        boxes of a decoding step; made here where one is missing)."""
        positions = dict(positions or {})
        x, windows = inputs, []
        for conv, (conv_weights, norm_weights), window in zip(
            self.convs, weights or self.read_step_weights(), state
        ):
            span = conv.window_span
            if span not in positions:
                positions[span] = window_position(window, step, span)
            x, window = conv.step(tf.nn.relu(x), window, positions[span], conv_weights)
            x = norm_rows(x, norm_weights)
            windows.append(window)
        return x, tuple(windows)

    def compute_output_shape(self, input_shape: Sequence[int | None]) -> tuple[int | None, ...]:
        return tuple(input_shape[:-1]) + (self.filters,)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(
            {
                "filters": self.filters,
                "convolutions": [list(c) for c in self.convolutions],
                "padding": self.padding,
                "groups": self.groups,
                "epsilon": self.epsilon,
            }
        )
        return config
