"""The decoder contract of `convs2s_tf.decoding.decoder_protocol`, checked on a model.

`check_decoder_contract(model)` runs on a built model of any family:

- the model satisfies `SearchableModel` (and its decoder `ShortlistDecoder` if it says
  so);
- stepping equals the parallel pass at every position (`atol`);
- every state leaf is `[hypotheses, ...]`, and a step keeps the shapes it was given;
- a state grown as the search grows it (`grow_state`: a column a step, then by several
  columns at once, as a compiled search's phases do) steps as the parallel pass does;
- reordering the state with the search's own `reorder_cache` moves each hypothesis'
  history with it: after a swap, every row goes on exactly as the swapped-in hypothesis
  would have;
- a step scored against `select_outputs(ids, valid)` (a shortlist) gives the full
  step's columns `ids`, and -inf in the filler columns.

In bfloat16 (a model built under `mixed_bfloat16`) the same holds to a looser `atol`.
"""

import numpy as np
import tensorflow as tf

from convs2s_tf.decoding.decoder_protocol import SearchableModel, ShortlistDecoder
from convs2s_tf.decoding.growing_state import grow_state
from convs2s_tf.decoding.search_step import reorder_cache
from convs2s_tf.vocabulary import EOS_ID


def check_decoder_contract(model, source, histories, beam_size=2, swap_at=2, atol=1e-5):
    """Checks `model` on `source` (`[sentences, S]`) and `histories` (`[sentences *
    beam_size, T]` decoder inputs starting with `</s>`, `beam_size` rows a sentence)."""
    assert isinstance(model, SearchableModel)
    source = tf.constant(source, tf.int32)
    histories = tf.constant(histories, tf.int32)
    hypotheses, length = histories.shape
    assert hypotheses == source.shape[0] * beam_size and swap_at < length
    assert np.all(histories[:, 0].numpy() == EOS_ID)
    # The parallel pass, one source row per hypothesis.
    repeated = tf.repeat(source, beam_size, axis=0)
    reference = model({"source": repeated, "target_input": histories}).numpy()

    encoder_output = model.encode(source)  # one row per sentence
    decoder = model.decoder
    state = decoder.initial_state(hypotheses)
    assert all(leaf.shape[0] == hypotheses for leaf in tf.nest.flatten(state))
    # Row r carries hypothesis order[r]; at `swap_at` the two first hypotheses of
    # sentence 0 swap places.
    order = np.arange(hypotheses)
    for step in range(length):
        if step == swap_at:
            beams = np.tile(np.arange(beam_size), (source.shape[0], 1)).astype(np.int32)
            beams[0, :2] = beams[0, 1::-1]
            rows = tf.range(source.shape[0], dtype=tf.int32)
            state = reorder_cache(state, tf.constant(beams), rows, beam_size)
            order = (beams + np.arange(source.shape[0])[:, None] * beam_size).reshape(-1)
        # A column a step, then (from the swap on) room for more than the rest needs.
        state = grow_state(decoder, state, step + 1 if step < swap_at else length + 3)
        shapes = [leaf.shape for leaf in tf.nest.flatten(state)]
        tokens = tf.gather(histories[:, step], order)
        if isinstance(decoder, ShortlistDecoder):
            _check_shortlist_step(decoder, tokens, step, state, encoder_output, beam_size)
        logits, attention, state = decoder.step(
            tokens, step, state, encoder_output, beam_size=beam_size
        )
        assert [leaf.shape for leaf in tf.nest.flatten(state)] == shapes
        assert attention.shape[0] == hypotheses and logits.dtype == tf.float32
        np.testing.assert_allclose(
            logits.numpy(), reference[order, step], atol=atol, err_msg=f"step {step}"
        )


def _check_shortlist_step(decoder, tokens, step, state, encoder_output, beam_size):
    """A step against a subset of columns (the last two fillers) equals the full step's
    columns."""
    ids = tf.constant([EOS_ID, 7, 5, 0, 0], tf.int32)
    valid = tf.constant([True, True, True, False, False])
    subset = decoder.select_outputs(ids, valid)
    full, _, _ = decoder.step(tokens, step, state, encoder_output, beam_size=beam_size)
    columns, _, _ = decoder.step(
        tokens, step, state, encoder_output, beam_size=beam_size, output_subset=subset
    )
    assert columns.dtype == tf.float32
    np.testing.assert_allclose(
        columns.numpy()[:, :3], tf.gather(full, ids[:3], axis=1).numpy(), rtol=1e-2, atol=1e-2
    )
    assert np.all(np.isneginf(columns.numpy()[:, 3:]))
