"""The operation count and beam selections of benchmarks.float32_floor (its timings are
the benchmark's)."""

import numpy as np
import pytest
import tensorflow as tf
from helpers.models import small_model_config

from benchmarks.float32_floor import (
    _attention_matrices,
    _flops,
    active_rows,
    row_products_seconds,
    search_flops,
    select_chunked,
    select_per_row,
    select_whole,
    shapes_batch1_seconds,
)
from convs2s_tf.models import ConvS2S


def _model(**overrides):
    model = ConvS2S(**small_model_config(11, width=16, blocks=2, **overrides))
    model(model.dummy_inputs())
    return model


@pytest.mark.parametrize("shared", [False, True])
def test_every_matrix_a_search_multiplies_is_counted_once_per_row(shared):
    model = _model(share_decoder_input_output_embed=shared)
    width, vocab, blocks, beam = 16, 11, 2, 5
    # Encoder: input projection, each block's 3-wide convolution (GLU: twice the
    # channels), output projection; one pass per source position.
    encoder_row = 2 * (width * width + blocks * 3 * width * 2 * width + width * width)
    # Decoder: the same, plus each block's attention projections (in and out), the
    # hidden projection, and the vocabulary projection (the token table when shared).
    decoder_row = 2 * (
        width * width
        + blocks * (3 * width * 2 * width + 2 * width * width)
        + width * width
        + width * vocab
    )
    steps, source_lengths = np.array([4, 7]), np.array([3, 6])
    encoder, search = search_flops(model, steps, source_lengths, beam)
    np.testing.assert_array_equal(encoder, encoder_row * source_lengths)
    # Per block, scores and context: 2 products of width x source each.
    attention = blocks * 4 * width * source_lengths
    np.testing.assert_array_equal(
        search, encoder_row * source_lengths + beam * steps * (decoder_row + attention)
    )


def test_every_selection_finds_the_same_candidates():
    sentences, beam, vocab = 3, 4, 400
    logits = tf.random.stateless_normal([sentences * beam, vocab], seed=(5, 0))
    scores = tf.random.stateless_normal([sentences * beam, 1], seed=(5, 1))
    whole = select_whole(scores, logits, sentences, beam).numpy()
    assert whole.shape == (sentences, 2 * beam)
    for select in (select_per_row, select_chunked):
        np.testing.assert_allclose(
            select(scores, logits, sentences, beam).numpy(), whole, atol=1e-5
        )


def test_active_rows_follow_each_batchs_sentences_until_they_finish():
    # Batch [1, 2] searches 1 and 2 steps, batch [0, 3] 3 and 5; two rows a sentence.
    rows = active_rows(np.array([3, 1, 2, 5]), [[1, 2], [0, 3]], beam=2)
    assert rows.tolist() == [4, 2, 4, 4, 4, 2, 2]


def test_row_products_are_timed_at_every_count_asked():
    matrices = [np.ones([8, 4], np.float32), np.ones([4, 8], np.float32)]
    seconds = row_products_seconds(matrices, np.array([2, 3, 8]))
    assert seconds.shape == (3,) and np.all(seconds > 0)


def test_attention_stand_ins_are_the_products_the_operation_count_has():
    model = _model()
    blocks, embed, length = 2, 16, 7
    matrices = _attention_matrices(model, length)
    assert [m.shape for m in matrices] == [(embed, length), (length, embed)] * blocks
    # search_flops counts 4 * embed operations a row, source position and attention block.
    assert _flops(matrices) == 4 * embed * length * blocks


def test_shapes_floor_counts_each_sentences_steps_and_encoder():
    model = _model()
    seconds = shapes_batch1_seconds(model, np.array([2, 4, 3]), np.array([5, 5, 9]), beam=2)
    assert seconds.shape == (3,) and np.all(seconds > 0)
    # The same source, twice the steps: one more pair of steps on the same encoder pass.
    assert seconds[1] > seconds[0]
