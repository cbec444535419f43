"""The search on a decoder that is not ConvS2S: only the decoder contract is used."""

import keras
import numpy as np
import tensorflow as tf

from convs2s_tf.decoding import SearchConfig, beam_search
from convs2s_tf.decoding.decoder_protocol import SearchableModel
from convs2s_tf.vocabulary import EOS_ID, PAD_ID

VOCAB = 9


class _Encoder:
    vocab_size = VOCAB
    max_length = 32


class _PrefixDecoder:
    """Strongly predicts each sentence's own source as its translation, but only while
    the hypothesis has followed it so far; its state (the length of the prefix matched)
    is the only memory of the history, so a wrong reorder derails it.

    The encoder output is the source itself, one row per sentence.
    """

    vocab_size = VOCAB
    pad_id = PAD_ID
    max_length = 32

    def initial_state(self, batch_size, positions=0):
        return {"matched": tf.zeros([batch_size], tf.int32)}

    def position_axes(self, state):
        return {"matched": None}

    def step(self, tokens, step, state, encoder_output, beam_size=1, output_subset=None):
        targets = tf.repeat(encoder_output, beam_size, axis=0)
        matched = state["matched"]
        previous = tf.gather(targets, tf.maximum(step - 1, 0), axis=1)
        followed = (step > 0) & tf.equal(matched, step - 1) & tf.equal(tokens, previous)
        matched = tf.where(followed, matched + 1, matched)
        on_track = tf.equal(matched, step)
        wanted = tf.gather(targets, tf.minimum(step, tf.shape(targets)[1] - 1), axis=1)
        wanted = tf.where(on_track, wanted, EOS_ID)
        # The wanted token first, then every other real token a little less likely.
        logits = tf.one_hot(wanted, VOCAB, on_value=6.0, off_value=0.0)
        logits += tf.range(VOCAB, dtype=tf.float32) * 0.01
        attention = tf.zeros([tf.shape(tokens)[0], tf.shape(encoder_output)[1]])
        return logits, attention, {"matched": matched}


class _PrefixModel(keras.layers.Layer):
    def __init__(self):
        super().__init__()
        self.encoder = _Encoder()
        self.decoder = _PrefixDecoder()

    def encode(self, source, training=False):
        return source

    def source_axes(self, encoder_output):
        return 1


def test_beam_search_runs_on_any_decoder_of_the_contract():
    model = _PrefixModel()
    assert isinstance(model, SearchableModel)
    source = tf.constant([[5, 6, 7, EOS_ID], [8, 4, EOS_ID, PAD_ID], [4, 4, 4, EOS_ID]])
    for beam_size in (1, 3):
        config = SearchConfig(beam_size=beam_size, nbest=beam_size, max_len_a=0, max_len_b=6)
        output = beam_search(model, source, config)
        best = output.tokens.numpy()[:, 0]
        for row, sentence in zip(best, source.numpy()):
            wanted = [token for token in sentence if token != PAD_ID]
            assert row[: len(wanted)].tolist() == wanted
        if beam_size > 1:
            # The other hypotheses left the source somewhere: each scores below the best.
            scores = output.scores.numpy()
            assert np.all(scores[:, 0] > scores[:, 1])
