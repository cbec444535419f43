"""The ConvS2S encoder."""

import math

import keras
import tensorflow as tf

from convs2s_tf.layers import GLU, GradientScale, RandomBitsDropout, WeightNormDense
from convs2s_tf.models.conv_blocks import block_layers, build_blocks, embed, embedding_layers
from convs2s_tf.models.encoder_output import EncoderOutput
from convs2s_tf.models.layer_spec import format_layer_spec, normalise_layer_spec
from convs2s_tf.models.tracking import track_layers, tracked_layers
from convs2s_tf.vocabulary import PAD_ID


@keras.saving.register_keras_serializable(package="convs2s_tf")
class ConvEncoder(keras.layers.Layer):
    """The ConvS2S encoder: embeddings, gated convolution blocks, keys and values.

    Follows the design document step by step: `e` = token + position embedding with
    dropout; `x = Linear(f -> c1)(e)`; per block a residual (projected when widths
    differ), padding zeroed, dropout, a "same" convolution to `2 * c_out` channels, GLU
    and `(x + r) * sqrt(0.5)`; then `z = Linear(c_last -> f)(x)` with padding zeroed and
    its gradient scaled by `1 / (2 * attention_layers)`. Keys are `z`, values
    `(z + e) * sqrt(0.5)`.

    Args:
        vocab_size: Source vocabulary size.
        embed_dim: Embedding width `f` (also the width of keys and values).
        layers: Layer spec text (`"[(512,3)]*9"`) or list of `(channels, width[, residual])`.
        dropout: Drop probability `p`, used by every dropout and by the initialisation.
        max_positions: Rows of the position table.
        use_positions: Whether to add learned position embeddings.
        num_attention_layers: Number of decoder attention modules reading this encoder;
            sets the gradient scale `1 / (2 * num_attention_layers)`.
        pad_id: Padding token id.
        **kwargs: Standard `keras.layers.Layer` arguments.

    Example:

    >>> encoder = ConvEncoder(vocab_size=20, embed_dim=8, layers="[(16,3)]*2")
    >>> output = encoder(tf.constant([[5, 6, 2], [1, 7, 2]]))
    >>> output.keys.shape, output.values.shape
    (TensorShape([2, 3, 8]), TensorShape([2, 3, 8]))
    """

    def __init__(
        self,
        vocab_size,
        embed_dim,
        layers,
        dropout=0.1,
        max_positions=1024,
        use_positions=True,
        num_attention_layers=1,
        pad_id=PAD_ID,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocab_size = int(vocab_size)
        self.embed_dim = int(embed_dim)
        self.layer_spec = normalise_layer_spec(layers)
        self.dropout = float(dropout)
        self.max_positions = int(max_positions)
        self.use_positions = bool(use_positions)
        self.num_attention_layers = int(num_attention_layers)
        self.pad_id = int(pad_id)
        keep = 1.0 - self.dropout

        self.token_embedding, self.position_embedding = embedding_layers(
            self.vocab_size, self.embed_dim, self.max_positions, self.use_positions, self.pad_id
        )
        self.dropout_layer = RandomBitsDropout(self.dropout)
        first_channels = self.layer_spec[0].channels
        self.input_projection = WeightNormDense(
            first_channels, stddev=math.sqrt(keep / self.embed_dim), name="input_projection"
        )
        widths, projections, convolutions = block_layers(self.layer_spec, self.dropout, "same")
        self.num_blocks = track_layers(self, "projection", projections)
        track_layers(self, "convolution", convolutions)
        self.block_widths = widths
        self.block_input_widths = widths[:-1]
        self.glu = GLU()
        self.output_projection = WeightNormDense(
            self.embed_dim, stddev=math.sqrt(1.0 / widths[-1]), name="output_projection"
        )
        self.gradient_scale = GradientScale(1.0 / (2.0 * max(self.num_attention_layers, 1)))

    @property
    def projections(self):
        return tracked_layers(self, "projection", self.num_blocks)

    @property
    def convolutions(self):
        return tracked_layers(self, "convolution", self.num_blocks)

    @property
    def max_length(self):
        """The longest source (its `</s>` included) the position table can embed."""
        return self.max_positions - self.pad_id - 1

    def build(self, input_shape=None):
        self.token_embedding.build((None, None))
        if self.position_embedding is not None:
            self.position_embedding.build((None, None))
        self.input_projection.build((None, None, self.embed_dim))
        build_blocks(self.layer_spec, self.block_widths, self.projections, self.convolutions)
        self.output_projection.build((None, None, self.block_widths[-1]))

    def embed(self, tokens, training=False):
        """`e`: token plus position embedding, with dropout."""
        return embed(
            self.token_embedding, self.position_embedding, self.dropout_layer, tokens, training
        )

    def call(self, source_tokens, training=False):
        source_mask = tf.not_equal(source_tokens, self.pad_id)
        pad_zeroing = tf.cast(source_mask, self.compute_dtype)[:, :, None]
        half = tf.constant(math.sqrt(0.5), self.compute_dtype)

        embedded = self.embed(source_tokens, training=training)
        x = self.input_projection(embedded)
        block_inputs = [x]
        for layer, projection, convolution in zip(
            self.layer_spec, self.projections, self.convolutions
        ):
            residual = None
            if layer.residual:
                residual = block_inputs[-layer.residual]
                if projection is not None:
                    residual = projection(residual)
            # Zeroing padding before each convolution makes positions next to padding
            # see exactly what they would see at a sequence edge (padding invariance).
            x = self.dropout_layer(x * pad_zeroing, training=training)
            x = self.glu(convolution(x))
            if residual is not None:
                x = (x + residual) * half
            block_inputs.append(x)

        keys = self.output_projection(x) * pad_zeroing
        keys = self.gradient_scale(keys)
        values = (keys + embedded) * half
        return EncoderOutput(keys=keys, values=values, source_mask=source_mask)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocab_size": self.vocab_size,
                "embed_dim": self.embed_dim,
                "layers": format_layer_spec(self.layer_spec),
                "dropout": self.dropout,
                "max_positions": self.max_positions,
                "use_positions": self.use_positions,
                "num_attention_layers": self.num_attention_layers,
                "pad_id": self.pad_id,
            }
        )
        return config
