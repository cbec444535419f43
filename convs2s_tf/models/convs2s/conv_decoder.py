"""The ConvS2S decoder, in parallel (training) and incremental (generation) form."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf

from convs2s_tf.layers import WeightNormDense
from convs2s_tf.layers.folded_kernels import FoldedKernels, TiedTableFolding
from convs2s_tf.layers.int8_kernel import Int8Kernel, kernel_product
from convs2s_tf.models.convs2s.conv_block import ConvBlock
from convs2s_tf.models.convs2s.conv_stack import ConvStack
from convs2s_tf.models.convs2s.encoder_output import EncoderOutput
from convs2s_tf.models.output_subset import OutputSubset, select_columns
from convs2s_tf.vocabulary import PAD_ID


@keras.saving.register_keras_serializable(package="convs2s_tf")
class ConvDecoder(TiedTableFolding, ConvStack):
    """The ConvS2S decoder: causal gated convolutions with multi-step attention.

    Follows the design document: `g` = token + position embedding with dropout (kept
    for attention); `x = Linear(f -> c1)(g)`; per block (`ConvBlock`, causal padding)
    dropout, a convolution to `2 * c_out` channels, GLU, attention when the block has
    one, and `(x + r) * sqrt(0.5)` with the residual `r` projected when widths differ;
    then `Linear(c_last -> f_out)`, dropout and the vocabulary
    projection (or the transposed token table plus a bias when input and output
    embeddings are shared).

    `call` runs every target position at once (training, scoring). Generation uses
    `initial_state` and `step`: each block caches the previous `k - 1` inputs of its
    convolution, so one step feeds one new position and recomputes nothing. `step`,
    `select_outputs` and `output_logits` take an optional `FoldedKernels` (`kernels`):
    the layers then compute with their folded kernels.

    Args:
        vocab_size: Target vocabulary size.
        embed_dim: Embedding width `f`; must equal the encoder's.
        layers: Layer spec text or list of `(channels, width[, residual])`.
        out_embed_dim: Width `f_out` before the vocabulary projection.
        attention: Which blocks have attention: True (all), False, a list of booleans
            or their text (`"[True, False, True]"`).
        dropout: Drop probability `p`.
        max_positions: Rows of the position table.
        use_positions: Whether to add learned position embeddings.
        share_embeddings: Use the transposed token table as the output projection
            (requires `out_embed_dim == embed_dim`).
        pad_id: Padding token id.
        **kwargs: Standard `keras.layers.Layer` arguments.

    Example:

    >>> from convs2s_tf.models import ConvEncoder
    >>> decoder = ConvDecoder(vocab_size=20, embed_dim=8, layers="[(16,3)]*2")
    >>> encoder = ConvEncoder(vocab_size=20, embed_dim=8, layers="[(16,3)]*2")
    >>> logits = decoder(tf.constant([[2, 5, 6]]), encoder(tf.constant([[7, 8, 2]])))
    >>> logits.shape
    TensorShape([1, 3, 20])
    """

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int,
        layers: str | Sequence[Sequence[int]],
        out_embed_dim: int = 256,
        attention: bool | str | Sequence[bool] = True,
        dropout: float = 0.1,
        max_positions: int = 1024,
        use_positions: bool = True,
        share_embeddings: bool = False,
        pad_id: int = PAD_ID,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            vocab_size,
            embed_dim,
            layers,
            dropout=dropout,
            max_positions=max_positions,
            use_positions=use_positions,
            pad_id=pad_id,
            padding="causal",
            attention=attention,
            **kwargs,
        )
        self.out_embed_dim = int(out_embed_dim)
        self.share_embeddings = bool(share_embeddings)
        if self.share_embeddings and self.out_embed_dim != self.embed_dim:
            raise ValueError(
                "Sharing the decoder's input and output embeddings needs out_embed_dim == "
                f"embed_dim, got out_embed_dim={self.out_embed_dim} and "
                f"embed_dim={self.embed_dim}."
            )
        self.hidden_projection = WeightNormDense(
            self.out_embed_dim,
            stddev=math.sqrt(1.0 / self.layer_spec[-1].channels),
            name="hidden_projection",
        )
        self.output_projection = (
            None
            if self.share_embeddings
            else WeightNormDense(
                self.vocab_size,
                stddev=math.sqrt((1.0 - self.dropout) / self.out_embed_dim),
                name="output_projection",
            )
        )

    @property
    def num_attention_layers(self) -> int:
        return sum(self.attention_spec)

    def build(self, input_shape: Sequence[int | None] | None = None) -> None:
        super().build(input_shape)
        self.hidden_projection.build((None, None, self.layer_spec[-1].channels))
        if self.output_projection is not None:
            self.output_projection.build((None, None, self.out_embed_dim))
        else:
            # The shared output map keeps its own bias, as the authors' implementation.
            self.output_bias = self.add_weight(
                name="output_bias", shape=(self.vocab_size,), initializer="zeros"
            )

    def _average(self, attention_weights: Sequence[tf.Tensor]) -> tf.Tensor:
        # The design document averages over the attention layers (not over all blocks).
        return tf.add_n(attention_weights) / float(len(attention_weights))

    def _logits(
        self,
        x: tf.Tensor,
        training: bool,
        output_subset: OutputSubset | None = None,
        kernels: FoldedKernels | None = None,
    ) -> tf.Tensor:
        features = self._hidden(x, training, kernels)
        if output_subset is None:
            return self.output_logits(features, kernels)
        logits = output_subset.product(features) + output_subset.bias
        return tf.cast(logits, tf.float32)

    def select_outputs(
        self, ids: tf.Tensor, valid: tf.Tensor, kernels: FoldedKernels | None = None
    ) -> OutputSubset:
        """The `OutputSubset` of target `ids` (`[columns]` int32; `valid` `[columns]` bool,
        False for filler columns): computed once per search, its step logits are the
        full logits' columns `ids` (-inf where not `valid`). `kernels`: optional
        `FoldedKernels` to read the projection from."""
        projection = self if self.output_projection is None else self.output_projection
        folded = kernels.kernel(projection) if kernels is not None else None
        if isinstance(folded, Int8Kernel):  # read in int8, `[out_embed_dim, vocab]`
            weights, vocabulary_axis, bias = folded, 1, self._projection_bias()
        else:
            weights, vocabulary_axis, bias = self._projection_weights(kernels)
        return select_columns(weights, vocabulary_axis, bias, ids, valid, self.compute_dtype)

    def _projection_weights(
        self, kernels: FoldedKernels | None = None
    ) -> tuple[tf.Tensor, int, tf.Tensor]:
        """The vocabulary projection as `(weights, vocabulary_axis, bias)`: the kernel
        (`[out_embed_dim, vocab]`, axis 1) or, when shared, the token table (`[vocab,
        out_embed_dim]`, axis 0; its folded transpose in `kernels`, axis 1) in the compute
        dtype, and the float32 bias (zeros if none)."""
        folded = kernels.float_kernel(self, self.compute_dtype) if kernels is not None else None
        if self.output_projection is not None:
            weights, axis = self.output_projection.compute_kernel(kernels), 1
        elif folded is not None:
            weights, axis = folded, 1
        else:
            weights, axis = self.token_embedding.embeddings, 0
        return tf.cast(weights, self.compute_dtype), axis, self._projection_bias()

    def _projection_bias(self) -> tf.Tensor:
        """The vocabulary projection's float32 bias (zeros if it has none)."""
        if self.output_projection is not None:
            bias = self.output_projection.bias
        else:
            bias = self.output_bias
        if bias is None:
            return tf.zeros([self.vocab_size], tf.float32)
        return tf.cast(bias, tf.float32)

    @property
    def output_table_is_tied(self) -> bool:
        """Whether the token table is also the output projection (`TiedTableFolding`)."""
        return self.share_embeddings

    def _hidden(
        self, x: tf.Tensor, training: bool, kernels: FoldedKernels | None = None
    ) -> tf.Tensor:
        x = self.hidden_projection(x, kernels=kernels)
        return self.dropout_layer(x, training=training)

    def output_logits(self, features: tf.Tensor, kernels: FoldedKernels | None = None) -> tf.Tensor:
        """The vocabulary projection of `features` (`[..., out_embed_dim]`), in float32
        (with the folded projection in `kernels`, if given).

        Training applies it to the non-pad target positions only (see `features`),
        which saves the largest matrix product of the model on padding.
        """
        if self.output_projection is not None:
            logits = self.output_projection(features, kernels=kernels)
        else:
            bias = tf.cast(self.output_bias, self.compute_dtype)
            folded = kernels.kernel(self) if kernels is not None else None
            if folded is not None:
                logits = kernel_product(features, folded) + bias
            else:
                table = tf.cast(self.token_embedding.embeddings, self.compute_dtype)
                logits = tf.matmul(features, table, transpose_b=True) + bias
        # Softmax, loss and search run in float32 whatever the compute dtype.
        return tf.cast(logits, tf.float32)

    def unbiased_output_logits(self, features: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """`output_logits` of `[tokens, out_embed_dim]` features without the output bias.

        Returns `(logits, bias)`: the product in the compute dtype and the float32 bias
        still to be added, for a loss that adds it in the same pass as its own work
        (`convs2s_tf.training.losses.fused_token_losses`).
        """
        weights, vocabulary_axis, bias = self._projection_weights()
        return tf.matmul(features, weights, transpose_b=vocabulary_axis == 0), bias

    def call(
        self,
        target_input: tf.Tensor,
        encoder_output: EncoderOutput,
        training: bool = False,
        return_attention: bool | str = False,
    ) -> tf.Tensor | tuple[tf.Tensor, tf.Tensor | list[tf.Tensor] | None]:
        """Logits for every target position; `return_attention` adds attention weights:
        True for the average over attention blocks (`[batch, target, source]`, None if
        no block attends), `"per_block"` for the list of each attention block's weights.
        """
        features, attention_weights = self._features(
            target_input, encoder_output, training, bool(return_attention)
        )
        logits = self.output_logits(features)
        if return_attention == "per_block":
            return logits, attention_weights
        if return_attention:
            return logits, self._average(attention_weights) if attention_weights else None
        return logits

    def features(
        self, target_input: tf.Tensor, encoder_output: EncoderOutput, training: bool = False
    ) -> tf.Tensor:
        """The inputs of the vocabulary projection, `[batch, target, out_embed_dim]`
        (after the final dropout): `output_logits(features(...))` equals `call(...)`."""
        return self._features(target_input, encoder_output, training, False)[0]

    def _features(
        self,
        target_input: tf.Tensor,
        encoder_output: EncoderOutput,
        training: bool,
        need_attention: bool,
        kernels: FoldedKernels | None = None,
    ) -> tuple[tf.Tensor, list[tf.Tensor]]:
        target_embedding = self.embed(target_input, training)
        attention_weights = []

        def apply_block(
            index: int, block: ConvBlock, x: tf.Tensor, residual: tf.Tensor | None
        ) -> tf.Tensor:
            x, weights = block(
                x,
                residual=residual,
                target_embedding=target_embedding,
                encoder_output=encoder_output,
                training=training,
                return_attention=True,
                kernels=kernels,
            )
            if need_attention and weights is not None:
                attention_weights.append(weights)
            return x

        x = self.run_blocks(self.input_projection(target_embedding, kernels=kernels), apply_block)
        return self._hidden(x, training, kernels), attention_weights

    def block_attention(
        self,
        target_input: tf.Tensor,
        encoder_output: EncoderOutput,
        kernels: FoldedKernels | None = None,
    ) -> list[tf.Tensor]:
        """Each attention block's weights `[batch, target, source]`, teacher-forced on
        `target_input` (with the folded `kernels`, if given: an export's)."""
        return self._features(target_input, encoder_output, False, True, kernels)[1]

    def initial_state(
        self, batch_size: int | tf.Tensor, positions: int | tf.Tensor = 0
    ) -> tuple[tf.Tensor, ...]:
        """The incremental state before the first step: per block, `k - 1` zero inputs
        (a fixed window: `positions` is not needed).

        Returns:
            A tuple with one `[batch, k - 1, c_in]` window per block.
        """
        return tuple(block.initial_window(batch_size, self.compute_dtype) for block in self.blocks)

    def position_axes(self, incremental_state: Sequence[tf.Tensor]) -> tuple[None, ...]:
        """None for every window: the state never grows (`IncrementalDecoder`)."""
        return tuple(None for _ in incremental_state)

    def step(
        self,
        tokens: tf.Tensor,
        step: int | tf.Tensor,
        incremental_state: Sequence[tf.Tensor],
        encoder_output: EncoderOutput,
        beam_size: int = 1,
        output_subset: OutputSubset | None = None,
        kernels: FoldedKernels | None = None,
    ) -> tuple[tf.Tensor, tf.Tensor, tuple[tf.Tensor, ...]]:
        """Decodes one position for every hypothesis, reusing the cached windows.

        Args:
            tokens: `[batch]` int, the previous output token of each hypothesis (`</s>`
                at step 0).
            step: Scalar int, the 0-based position of `tokens` in the decoder input.
            incremental_state: The tuple from `initial_state` or the previous step.
            encoder_output: `EncoderOutput` with one row per `beam_size` consecutive
                hypotheses (their sentence).
            beam_size: Hypotheses per sentence.
            output_subset: An `OutputSubset` (`select_outputs`): logits of its columns
                only; None: of the whole vocabulary.
            kernels: Optional `FoldedKernels`: the layers compute with their folded
                kernels.

        Returns:
            `(logits, attention, incremental_state)`: `[batch, vocab]` (or `[batch,
            columns]`) float32 logits,
            `[batch, source]` attention averaged over the attention blocks (zeros when no
            block has attention) and the updated state.
        """
        target_embedding = self.embed(tokens[:, None], training=False, step=step)
        new_state, attention_weights = [], []

        def apply_block(
            index: int, block: ConvBlock, x: tf.Tensor, residual: tf.Tensor | None
        ) -> tf.Tensor:
            x, weights, window = block.step(
                x,
                incremental_state[index],
                residual=residual,
                target_embedding=target_embedding,
                encoder_output=encoder_output,
                beam_size=beam_size,
                kernels=kernels,
            )
            new_state.append(window)
            if weights is not None:
                attention_weights.append(weights)
            return x

        x = self.run_blocks(self.input_projection(target_embedding, kernels=kernels), apply_block)
        if self.compute_dtype == "float32":
            # [batch, channels] from here on: the vocabulary projection is one product
            # with its bias fused.
            logits = self._logits(x[:, 0, :], False, output_subset, kernels)
        else:
            # In bfloat16 a fused product and bias rounds once, the product then the bias
            # twice: the projections keep their [batch, 1, channels] form, which is not
            # fused, so that a step rounds as the parallel pass over [batch, time,
            # channels] does and translations do not depend on a kernel fusion.
            logits = self._logits(x, False, output_subset, kernels)[:, 0, :]
        if attention_weights:
            attention = self._average(attention_weights)[:, 0, :]
        else:
            attention = tf.zeros([tf.shape(tokens)[0], tf.shape(encoder_output.keys)[1]])
        return logits, attention, tuple(new_state)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        del config["padding"]  # Always causal.
        config.update(
            {
                "out_embed_dim": self.out_embed_dim,
                "share_embeddings": self.share_embeddings,
            }
        )
        return config
