"""Depthwise-separable 1-D convolution with dilation, channel groups and a causal step."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import keras
import tensorflow as tf

from convs2s_tf.models.limited_axis import at_most
from convs2s_tf.models.posenet.step_weights import read_variable

_PADDINGS = ("same", "causal")

# The axis of a causal step's window that holds one entry a position.
WINDOW_POSITION_AXIS = 1


class SeparableWeights(NamedTuple):
    """A `SeparableConv1D`'s weights in its compute dtype, as its step reads them.

    Fields:
        depthwise: `[window_span, channels]`: row `age` weighs the input `age`
            positions back (zeros between dilated taps).
        pointwise: One `[channels / groups, filters / groups]` map per group.
        bias: `[filters]`, or None.
    """

    depthwise: tf.Tensor
    pointwise: tuple[tf.Tensor, ...]
    bias: tf.Tensor | None


class WindowPosition(NamedTuple):
    """Where a causal step writes in windows of one span, and the age of each of their
    columns' inputs: the same for every convolution of that span in a decoding step
    (`window_position`).

    Fields:
        column: Scalar int32, the column the step writes (`step % span`).
        ages: `[width]` int32, positions between each column's input and the step's.
        known_width: Whether the windows' width is fixed where the step is traced (a
            compiled step): a select writes the column there, a scatter otherwise.
    """

    column: tf.Tensor
    ages: tf.Tensor
    known_width: bool

    def write(self, window: tf.Tensor, inputs: tf.Tensor) -> tf.Tensor:
        """`window` `[batch, width, channels]` with `inputs` `[batch, channels]` in the
        step's column."""
        if self.known_width:  # XLA fuses the select; a scatter it runs as a loop
            at_column = tf.range(window.shape[1]) == self.column
            return tf.where(at_column[None, :, None], inputs[:, None], window)
        rows = tf.range(tf.shape(window)[0])
        indices = tf.stack([rows, tf.fill(tf.shape(rows), self.column)], axis=1)
        # In place: the search hands over a freshly reordered window.
        return tf.tensor_scatter_nd_update(window, indices, inputs)


def window_position(window: tf.Tensor, step: int | tf.Tensor, span: int) -> WindowPosition:
    """The `WindowPosition` of `step` in `window` (`[batch, width, channels]`, grown to
    hold it) of a convolution reading `span` inputs."""
    width = window.shape[1]
    known = width is not None
    column = tf.math.floormod(tf.cast(step, tf.int32), span)
    columns = tf.range(width if known else tf.shape(window)[1])
    return WindowPosition(column, tf.math.floormod(column - columns, span), known)


# Inputs of at most this many positions (batch x time) convolve by gathering taps at
# inference: TensorFlow's depthwise op costs about 160 microseconds a call on oneDNN
# whatever the size, a third of a one-sentence PoseNet encoder's 11 ms (its 24 calls);
# gathered, the encoder took 8 ms. At 8 or 128 sentences the gathered windows cost
# more than the op (measured: 185 against 122 ms, 187 against 146 ms a batch).
GATHERED_TAPS_POSITIONS = 64


@keras.saving.register_keras_serializable(package="convs2s_tf")
class SeparableConv1D(keras.layers.Layer):
    """A depthwise convolution over time, then a pointwise map across channels.

    The convolution of SliceNet's and PoseNet's convolution boxes (tensor2tensor's
    `subseparable_conv`): each input channel is convolved over time with its own kernel
    of `kernel_size` taps spaced `dilation_rate` apart, then a 1x1 map mixes channels.
    With `groups` > 1 ("super-separable") the channels are split into `groups` equal
    parts, each with its own pointwise map to `filters / groups` outputs, concatenated:
    `groups` times fewer pointwise weights.

    `"causal"` padding puts the `(kernel_size - 1) * dilation_rate` zeros on the left,
    so output `t` sees inputs up to `t` only, and `step` decodes one position from a
    window of that many past inputs (`initial_window`: zeros, as the padding) with the
    weights read once (`read_step_weights`). `"same"`
    splits the padding between both sides (the extra zero on the right). At inference
    (`training=False`) an input of at most `GATHERED_TAPS_POSITIONS` positions gathers
    each position's taps instead of calling TensorFlow's depthwise op (the same sums).

    Args:
        filters: Output channels (divisible by `groups`).
        kernel_size: Taps of the depthwise kernel.
        dilation_rate: Spacing of the taps.
        padding: `"same"` or `"causal"`.
        groups: Channel groups of the pointwise map (input channels divisible by it).
        use_bias: Add a bias after the pointwise map (SliceNet's boxes have none).
        kernel_initializer: Initialiser of both kernels.
        **kwargs: Standard `keras.layers.Layer` arguments.

    Example:

    >>> conv = SeparableConv1D(filters=8, kernel_size=3, dilation_rate=2, padding="causal")
    >>> conv(tf.ones([2, 5, 4])).shape
    TensorShape([2, 5, 8])
    """

    def __init__(
        self,
        filters: int,
        kernel_size: int,
        dilation_rate: int = 1,
        padding: str = "same",
        groups: int = 1,
        use_bias: bool = False,
        kernel_initializer: Any = "glorot_uniform",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if padding not in _PADDINGS:
            raise ValueError(f"padding must be one of {_PADDINGS}, got {padding!r}.")
        for name, value in (("kernel_size", kernel_size), ("dilation_rate", dilation_rate)):
            if int(value) < 1:
                raise ValueError(f"{name} must be >= 1, got {value}.")
        if int(groups) < 1 or int(filters) % int(groups):
            raise ValueError(f"filters={filters} must split into groups={groups}.")
        self.filters = int(filters)
        self.kernel_size = int(kernel_size)
        self.dilation_rate = int(dilation_rate)
        self.padding = padding
        self.groups = int(groups)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    @property
    def window_length(self) -> int:
        """Past inputs a causal step needs: `(kernel_size - 1) * dilation_rate`."""
        return (self.kernel_size - 1) * self.dilation_rate

    @property
    def left_padding(self) -> int:
        """Zeros before the first input: the whole window (causal) or its first half."""
        total = self.window_length
        return total if self.padding == "causal" else total // 2

    def reaching_taps(self, length: int | tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """`(first, last)`: the taps that read an input of a `length`-long sequence at
        some output position (tap `j` reads input `t + j * dilation_rate -
        left_padding` at output `t`), kept around the tap on the output's own position.
        The others read padding only."""
        rate, left = self.dilation_rate, self.left_padding
        # ceil and floor of (left -+ (length - 1)) / rate, within the kernel.
        first = tf.clip_by_value(-((length - 1 - left) // rate), 0, left // rate)
        last = tf.clip_by_value((left + length - 1) // rate, -(-left // rate), self.kernel_size - 1)
        return first, last

    def build(self, input_shape: Sequence[int | None]) -> None:
        channels = input_shape[-1]
        if channels is None:
            raise ValueError("SeparableConv1D needs inputs with a known channel dimension.")
        if channels % self.groups:
            raise ValueError(f"{channels} input channels do not split into {self.groups} groups.")
        self.depthwise_kernel = self.add_weight(
            name="depthwise_kernel",
            shape=(self.kernel_size, channels),
            initializer=self.kernel_initializer,
        )
        self.pointwise_kernel = self.add_weight(
            name="pointwise_kernel",
            shape=(self.groups, channels // self.groups, self.filters // self.groups),
            initializer=self.kernel_initializer,
        )
        self.bias = (
            self.add_weight(name="bias", shape=(self.filters,), initializer="zeros")
            if self.use_bias
            else None
        )

    def call(self, inputs: tf.Tensor, training: bool = False) -> tf.Tensor:
        if training:
            return self._pointwise(self._depthwise_op(inputs))
        shape = tf.shape(inputs)
        depthwise = tf.cond(
            shape[0] * shape[1] <= GATHERED_TAPS_POSITIONS,
            lambda: self._depthwise_gathered(inputs),
            lambda: self._depthwise_op(inputs),
        )
        return self._pointwise(depthwise)

    def _reaching_padding(self, length: tf.Tensor) -> tuple[tf.Tensor, ...]:
        """`(first, last, left, right)`: the taps that reach an input (`reaching_taps`)
        and the padding they read on each side."""
        first, last = self.reaching_taps(length)
        # Only the taps that reach an input, and the padding they read: the others
        # would multiply nothing but padding (a 31-tap kernel dilated 4 times spans
        # 121 positions, against Multi30k's 10 to 40).
        left = self.left_padding - first * self.dilation_rate
        return first, last, left, last * self.dilation_rate - self.left_padding

    def _depthwise_op(self, inputs: tf.Tensor) -> tf.Tensor:
        """The depthwise convolution by TensorFlow's depthwise op."""
        shape = tf.shape(inputs)
        length, rate = shape[1], self.dilation_rate
        first, last, left, right = self._reaching_padding(length)
        # Dilation by reshape: time padded to whole rows of `rate` positions and laid
        # out as [rows, rate], so taps `rate` apart are neighbours along the rows and
        # the 2-D depthwise op runs undilated over them. Time on the height axis also
        # suits TF's CPU kernels: their filter gradient takes a slow scalar path along
        # a width shorter than the kernel (docs/posenet.md, "What a step costs").
        padded_length = length + left + right
        right += -padded_length % rate
        padded = tf.pad(inputs, [[0, 0], [left, right], [0, 0]])
        grid = tf.reshape(padded, [shape[0], -1, rate, inputs.shape[-1]])
        kernel = tf.cast(self.depthwise_kernel[first : last + 1], self.compute_dtype)
        depthwise = tf.nn.depthwise_conv2d(
            grid, kernel[:, None, :, None], strides=[1, 1, 1, 1], padding="VALID"
        )
        depthwise = tf.reshape(depthwise, [shape[0], -1, inputs.shape[-1]])
        if rate > 1:  # less than a row of outputs beyond the last input
            depthwise = depthwise[:, :length]
        return depthwise

    def _depthwise_gathered(self, inputs: tf.Tensor) -> tf.Tensor:
        """The depthwise convolution as each position's taps, gathered, times the kernel,
        summed: no op with a fixed cost per call (see `GATHERED_TAPS_POSITIONS`)."""
        length = tf.shape(inputs)[1]
        first, last, left, right = self._reaching_padding(length)
        padded = tf.pad(inputs, [[0, 0], [left, right], [0, 0]])
        # [time, taps]: the padded positions each output reads.
        taps = tf.range(last - first + 1) * self.dilation_rate
        index = tf.range(length)[:, None] + taps[None, :]
        kernel = tf.cast(self.depthwise_kernel[first : last + 1], self.compute_dtype)
        return tf.reduce_sum(tf.gather(padded, index, axis=1) * kernel, axis=2)

    def _pointwise(self, depthwise: tf.Tensor) -> tf.Tensor:
        """The grouped 1x1 map of `[..., channels]` to `[..., filters]`."""
        shape = tf.shape(depthwise)
        rows = tf.reshape(depthwise, [-1, depthwise.shape[-1]])
        kernel = tf.cast(self.pointwise_kernel, self.compute_dtype)
        parts = tuple(kernel[g] for g in range(self.groups))
        bias = None if self.bias is None else tf.cast(self.bias, self.compute_dtype)
        outputs = _pointwise_rows(rows, parts, bias)
        return tf.reshape(outputs, tf.concat([shape[:-1], [self.filters]], 0))

    @property
    def window_span(self) -> int:
        """Inputs a causal step reads, its own included: `window_length + 1`."""
        return self.window_length + 1

    def initial_window(
        self, batch_size: int | tf.Tensor, channels: int, positions: int | tf.Tensor = 0
    ) -> tf.Tensor:
        """Returns the window before the first causal step: `[batch, min(positions,
        window_span), channels]` zeros (the left padding), grown by the search to at
        most `window_span` columns (`LimitedAxis`)."""
        width = at_most(positions, self.window_span)
        return tf.zeros([batch_size, width, channels], self.compute_dtype)

    def read_step_weights(self) -> SeparableWeights:
        """The weights `step` computes with, in the compute dtype."""
        dtype = self.compute_dtype
        kernel = read_variable(self.pointwise_kernel, dtype)
        depthwise = read_variable(self.depthwise_kernel, dtype)
        # Row `age` multiplies the input `age` positions back: the taps newest first,
        # `dilation_rate` rows apart, zeros between them.
        by_age = tf.scatter_nd(
            tf.range(self.kernel_size)[:, None] * self.dilation_rate,
            depthwise[::-1],
            [self.window_span, depthwise.shape[-1]],
        )
        return SeparableWeights(
            depthwise=by_age,
            pointwise=tuple(kernel[g] for g in range(self.groups)),
            bias=None if self.bias is None else read_variable(self.bias, dtype),
        )

    def step(
        self,
        inputs: tf.Tensor,
        window: tf.Tensor,
        position: WindowPosition,
        weights: SeparableWeights | None = None,
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """Returns `(output, window)` of one causal position.

        The window holds position `p` in column `p % window_span` (a ring): the step
        writes its input over the oldest and weighs each column by its input's age, so
        no column moves. Until the window is full its columns are in time order, and
        the sums are those of the parallel pass.

        Args:
            inputs: `[batch, channels]`, the input at this position.
            window: `[batch, width, channels]`, the inputs so far (`initial_window`,
                grown by the search to hold this position).
            position: The step's `WindowPosition` for this window's span.
            weights: `read_step_weights()` (read once for many steps), or None: read now.

        Returns:
            The `[batch, filters]` output and the window holding the input.

        Raises:
            ValueError: for a `"same"` convolution, which needs later inputs.
        """
        if self.padding != "causal":
            raise ValueError("Only a causal SeparableConv1D can step.")
        weights = weights or self.read_step_weights()
        window = position.write(window, tf.cast(inputs, window.dtype))
        depthwise = tf.reduce_sum(window * tf.gather(weights.depthwise, position.ages), axis=1)
        return _pointwise_rows(depthwise, weights.pointwise, weights.bias), window

    def compute_output_shape(self, input_shape: Sequence[int | None]) -> tuple[int | None, ...]:
        return tuple(input_shape[:-1]) + (self.filters,)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(
            {
                "filters": self.filters,
                "kernel_size": self.kernel_size,
                "dilation_rate": self.dilation_rate,
                "padding": self.padding,
                "groups": self.groups,
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config


def _pointwise_rows(
    rows: tf.Tensor, parts: Sequence[tf.Tensor], bias: tf.Tensor | None
) -> tf.Tensor:
    """The grouped 1x1 map of `[rows, channels]`: `parts` holds each group's map."""
    # One plain matrix product per group: an einsum with the group as a batch axis
    # differentiates into a kernel gradient that oneDNN runs ~100x slower (measured:
    # 220 ms against 2 ms a convolution on a 4,000-token bfloat16 batch).
    if len(parts) == 1:
        outputs = tf.matmul(rows, parts[0])
    else:
        inputs = tf.split(rows, len(parts), axis=-1)
        outputs = tf.concat([tf.matmul(x, part) for x, part in zip(inputs, parts)], -1)
    return outputs if bias is None else outputs + bias
