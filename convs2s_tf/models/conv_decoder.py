"""The ConvS2S decoder, in parallel (training) and incremental (generation) form."""

import math

import keras
import tensorflow as tf

from convs2s_tf.layers import GLU, MultiStepAttention, RandomBitsDropout, WeightNormDense
from convs2s_tf.models.conv_blocks import block_layers, build_blocks, embed, embedding_layers
from convs2s_tf.models.layer_spec import (
    format_layer_spec,
    normalise_layer_spec,
    parse_attention_spec,
)
from convs2s_tf.models.tracking import track_layers, tracked_layers
from convs2s_tf.vocabulary import PAD_ID


@keras.saving.register_keras_serializable(package="convs2s_tf")
class ConvDecoder(keras.layers.Layer):
    """The ConvS2S decoder: causal gated convolutions with multi-step attention.

    Follows the design document: `g` = token + position embedding with dropout (kept
    for attention); `x = Linear(f -> c1)(g)`; per block a residual, dropout, a causal
    convolution to `2 * c_out` channels, GLU, attention when the block has one, and
    `(x + r) * sqrt(0.5)`; then `Linear(c_last -> f_out)`, dropout and the vocabulary
    projection (or the transposed token table plus a bias when input and output
    embeddings are shared).

    `call` runs every target position at once (training, scoring). Generation uses
    `initial_state` and `step`: each block caches the previous `k - 1` inputs of its
    convolution, so one step feeds one new position and recomputes nothing.

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

    >>> decoder = ConvDecoder(vocab_size=20, embed_dim=8, layers="[(16,3)]*2")
    >>> encoder = ConvEncoder(vocab_size=20, embed_dim=8, layers="[(16,3)]*2")
    >>> logits = decoder(tf.constant([[2, 5, 6]]), encoder(tf.constant([[7, 8, 2]])))
    >>> logits.shape
    TensorShape([1, 3, 20])
    """

    def __init__(
        self,
        vocab_size,
        embed_dim,
        layers,
        out_embed_dim=256,
        attention=True,
        dropout=0.1,
        max_positions=1024,
        use_positions=True,
        share_embeddings=False,
        pad_id=PAD_ID,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocab_size = int(vocab_size)
        self.embed_dim = int(embed_dim)
        self.layer_spec = normalise_layer_spec(layers)
        self.out_embed_dim = int(out_embed_dim)
        self.attention_spec = parse_attention_spec(attention, len(self.layer_spec))
        self.dropout = float(dropout)
        self.max_positions = int(max_positions)
        self.use_positions = bool(use_positions)
        self.share_embeddings = bool(share_embeddings)
        self.pad_id = int(pad_id)
        if self.share_embeddings and self.out_embed_dim != self.embed_dim:
            raise ValueError(
                "Sharing the decoder's input and output embeddings needs out_embed_dim == "
                f"embed_dim, got out_embed_dim={self.out_embed_dim} and "
                f"embed_dim={self.embed_dim}."
            )
        keep = 1.0 - self.dropout

        self.token_embedding, self.position_embedding = embedding_layers(
            self.vocab_size, self.embed_dim, self.max_positions, self.use_positions, self.pad_id
        )
        self.dropout_layer = RandomBitsDropout(self.dropout)
        first_channels = self.layer_spec[0].channels
        self.input_projection = WeightNormDense(
            first_channels, stddev=math.sqrt(keep / self.embed_dim), name="input_projection"
        )
        widths, projections, convolutions = block_layers(self.layer_spec, self.dropout, "causal")
        attentions = [
            (
                MultiStepAttention(layer.channels, self.embed_dim, name=f"attention_{index}")
                if has_attention
                else None
            )
            for index, (layer, has_attention) in enumerate(
                zip(self.layer_spec, self.attention_spec)
            )
        ]
        self.num_blocks = track_layers(self, "projection", projections)
        track_layers(self, "convolution", convolutions)
        track_layers(self, "attention", attentions)
        self.block_widths = widths
        self.block_input_widths = widths[:-1]
        self.glu = GLU()
        self.hidden_projection = WeightNormDense(
            self.out_embed_dim, stddev=math.sqrt(1.0 / widths[-1]), name="hidden_projection"
        )
        self.output_projection = (
            None
            if self.share_embeddings
            else WeightNormDense(
                self.vocab_size,
                stddev=math.sqrt(keep / self.out_embed_dim),
                name="output_projection",
            )
        )

    @property
    def projections(self):
        return tracked_layers(self, "projection", self.num_blocks)

    @property
    def convolutions(self):
        return tracked_layers(self, "convolution", self.num_blocks)

    @property
    def attentions(self):
        return tracked_layers(self, "attention", self.num_blocks)

    @property
    def num_attention_layers(self):
        return sum(self.attention_spec)

    @property
    def max_length(self):
        """The longest decoder input the position table can embed."""
        return self.max_positions - self.pad_id - 1

    def build(self, input_shape=None):
        self.token_embedding.build((None, None))
        if self.position_embedding is not None:
            self.position_embedding.build((None, None))
        self.input_projection.build((None, None, self.embed_dim))
        build_blocks(self.layer_spec, self.block_widths, self.projections, self.convolutions)
        for attention in self.attentions:
            if attention is not None:
                attention.build()
        self.hidden_projection.build((None, None, self.block_widths[-1]))
        if self.output_projection is not None:
            self.output_projection.build((None, None, self.out_embed_dim))
        else:
            # The shared output map keeps its own bias, as the authors' implementation.
            self.output_bias = self.add_weight(
                name="output_bias", shape=(self.vocab_size,), initializer="zeros"
            )

    def _blocks(self, x, target_embedding, encoder_output, convolve, need_attention, beam_size=1):
        """Runs the blocks; `convolve(index, convolution, x)` applies one convolution.

        With `beam_size > 1` (one position per hypothesis, `beam_size` consecutive
        hypotheses per row of `encoder_output`), attention runs on the hypotheses grouped
        by sentence, `[batch, beam, channels]`, so the encoder output is never repeated.

        Returns the output and, if `need_attention`, the list of attention weights of the
        attention blocks.
        """
        half = tf.constant(math.sqrt(0.5), self.compute_dtype)
        attention_weights = []
        block_inputs = [x]
        for index, (layer, projection, convolution, attention) in enumerate(
            zip(self.layer_spec, self.projections, self.convolutions, self.attentions)
        ):
            residual = None
            if layer.residual:
                residual = block_inputs[-layer.residual]
                if projection is not None:
                    residual = projection(residual)
            x = self.glu(convolve(index, convolution, x))
            if attention is not None:
                x, weights = attention(
                    _group(x, beam_size),
                    _group(target_embedding, beam_size),
                    encoder_output.keys,
                    encoder_output.values,
                    source_mask=encoder_output.source_mask,
                )
                x, weights = _ungroup(x, beam_size), _ungroup(weights, beam_size)
                if need_attention:
                    attention_weights.append(weights)
            if residual is not None:
                x = (x + residual) * half
            block_inputs.append(x)
        return x, attention_weights

    def _average(self, attention_weights):
        # The design document averages over the attention layers (not over all blocks).
        return tf.add_n(attention_weights) / float(len(attention_weights))

    def _logits(self, x, training):
        return self.output_logits(self._hidden(x, training))

    def _hidden(self, x, training):
        x = self.hidden_projection(x)
        return self.dropout_layer(x, training=training)

    def output_logits(self, features):
        """The vocabulary projection of `features` (`[..., out_embed_dim]`), in float32.

        Training applies it to the non-pad target positions only (see `features`),
        which saves the largest matrix product of the model on padding.
        """
        if self.output_projection is not None:
            logits = self.output_projection(features)
        else:
            table = tf.cast(self.token_embedding.embeddings, self.compute_dtype)
            logits = tf.matmul(features, table, transpose_b=True) + tf.cast(
                self.output_bias, self.compute_dtype
            )
        # Softmax, loss and search run in float32 whatever the compute dtype.
        return tf.cast(logits, tf.float32)

    def unbiased_output_logits(self, features):
        """`output_logits` of `[tokens, out_embed_dim]` features without the output bias.

        Returns `(logits, bias)`: the product in the compute dtype and the float32 bias
        still to be added, for a loss that adds it in the same pass as its own work
        (`convs2s_tf.training.losses.fused_token_losses`).
        """
        if self.output_projection is not None:
            kernel = tf.cast(self.output_projection.kernel, self.compute_dtype)
            logits = tf.matmul(features, kernel)
            bias = self.output_projection.bias
        else:
            table = tf.cast(self.token_embedding.embeddings, self.compute_dtype)
            logits = tf.matmul(features, table, transpose_b=True)
            bias = self.output_bias
        if bias is None:
            return logits, tf.zeros([self.vocab_size], tf.float32)
        return logits, tf.cast(bias, tf.float32)

    def _embed(self, tokens, training, step=None):
        return embed(
            self.token_embedding,
            self.position_embedding,
            self.dropout_layer,
            tokens,
            training,
            step=step,
        )

    def call(self, target_input, encoder_output, training=False, return_attention=False):
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

    def features(self, target_input, encoder_output, training=False):
        """The inputs of the vocabulary projection, `[batch, target, out_embed_dim]`
        (after the final dropout): `output_logits(features(...))` equals `call(...)`."""
        return self._features(target_input, encoder_output, training, False)[0]

    def _features(self, target_input, encoder_output, training, need_attention):
        target_embedding = self._embed(target_input, training)
        x = self.input_projection(target_embedding)

        def convolve(index, convolution, x):
            return convolution(self.dropout_layer(x, training=training))

        x, attention_weights = self._blocks(
            x, target_embedding, encoder_output, convolve, need_attention=need_attention
        )
        return self._hidden(x, training), attention_weights

    def initial_state(self, batch_size):
        """The incremental state before the first step: per block, `k - 1` zero inputs.

        Returns:
            A tuple with one `[batch, k - 1, c_in]` window per block.
        """
        return tuple(
            convolution.initial_window(batch_size, width, self.compute_dtype)
            for convolution, width in zip(self.convolutions, self.block_input_widths)
        )

    def step(self, tokens, step, incremental_state, encoder_output, beam_size=1):
        """Decodes one position for every hypothesis, reusing the cached windows.

        Args:
            tokens: `[batch]` int, the previous output token of each hypothesis (`</s>`
                at step 0).
            step: Scalar int, the 0-based position of `tokens` in the decoder input.
            incremental_state: The tuple from `initial_state` or the previous step.
            encoder_output: `EncoderOutput` with one row per `beam_size` consecutive
                hypotheses (their sentence).
            beam_size: Hypotheses per sentence.

        Returns:
            `(logits, attention, incremental_state)`: `[batch, vocab]` float32 logits,
            `[batch, source]` attention averaged over the attention blocks (zeros when no
            block has attention) and the updated state.
        """
        target_embedding = self._embed(tokens[:, None], training=False, step=step)
        x = self.input_projection(target_embedding)
        new_state = [None] * self.num_blocks

        def convolve(index, convolution, x):
            outputs, new_state[index] = convolution.step(x[:, 0, :], incremental_state[index])
            return outputs[:, None, :]

        x, attention_weights = self._blocks(
            x, target_embedding, encoder_output, convolve, True, beam_size=beam_size
        )
        logits = self._logits(x, training=False)[:, 0, :]
        if attention_weights:
            attention = self._average(attention_weights)[:, 0, :]
        else:
            attention = tf.zeros([tf.shape(tokens)[0], tf.shape(encoder_output.keys)[1]])
        return logits, attention, tuple(new_state)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocab_size": self.vocab_size,
                "embed_dim": self.embed_dim,
                "layers": format_layer_spec(self.layer_spec),
                "out_embed_dim": self.out_embed_dim,
                "attention": list(self.attention_spec),
                "dropout": self.dropout,
                "max_positions": self.max_positions,
                "use_positions": self.use_positions,
                "share_embeddings": self.share_embeddings,
                "pad_id": self.pad_id,
            }
        )
        return config


def _group(x, beam_size):
    """`[batch * beam, 1, d]` -> `[batch, beam, d]`."""
    if beam_size == 1:
        return x
    return tf.reshape(x, [-1, beam_size, x.shape[-1]])


def _ungroup(x, beam_size):
    """`[batch, beam, d]` -> `[batch * beam, 1, d]`."""
    if beam_size == 1:
        return x
    return tf.reshape(x, [-1, 1, tf.shape(x)[-1]])
