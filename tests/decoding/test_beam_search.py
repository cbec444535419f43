"""Tests of the incremental beam search against brute force and full recomputation."""

import itertools

import numpy as np
import pytest
import tensorflow as tf
from helpers.recompute_search import recompute_beam_search
from helpers.search_models import tiny_model

from convs2s_tf.decoding import SearchConfig, beam_search, max_output_lengths
from convs2s_tf.decoding.beam_search import n_best
from convs2s_tf.decoding.beam_state import BeamState, FinishedHypotheses
from convs2s_tf.vocabulary import EOS_ID, PAD_ID, UNK_ID


def sequence_log_prob(model, source_row, target):
    """Sum of log-probabilities of `target` (ending in </s>) by a full parallel pass."""
    decoder_input = [EOS_ID] + list(target[:-1])
    logits = model({"source": source_row[None], "target_input": tf.constant([decoder_input])})
    log_probs = tf.nn.log_softmax(logits[0]).numpy()
    return float(sum(log_probs[i, token] for i, token in enumerate(target)))


def brute_force(model, source_row, choices, max_len, alpha=1.0, min_length=1):
    scored = []
    for length in range(min_length, max_len + 1):
        for sequence in itertools.product(choices, repeat=length):
            target = list(sequence) + [EOS_ID]
            score = sequence_log_prob(model, source_row, target) / len(target) ** alpha
            scored.append((score, target))
    scored.sort(key=lambda item: -item[0])
    return scored


SOURCE = tf.constant([[5, 6, 7, 2], [1, 1, 8, 2]])


def test_wide_beam_finds_brute_force_best():
    model = tiny_model()
    # Choosable tokens besides </s>: <s>, <unk> and 4 (pad is never chosen).
    choices = [0, UNK_ID, 4]
    output = beam_search(model, SOURCE, SearchConfig(beam_size=64, nbest=3, max_len_b=3))
    for row in range(2):
        expected = brute_force(model, SOURCE[row], choices, max_len=3)
        for rank in range(3):
            length = output.lengths[row, rank].numpy()
            assert output.tokens[row, rank, :length].numpy().tolist() == expected[rank][1]
            assert output.scores[row, rank].numpy() == pytest.approx(expected[rank][0], abs=1e-5)


def test_length_penalty_changes_the_choice():
    model = tiny_model(seed=11)
    choices = [0, UNK_ID, 4]
    lengths = {}
    for alpha in (0.0, 2.0):
        output = beam_search(
            model, SOURCE[:1], SearchConfig(beam_size=64, max_len_b=3, length_penalty=alpha)
        )
        expected = brute_force(model, SOURCE[0], choices, max_len=3, alpha=alpha)
        found = output.tokens[0, 0, : output.lengths[0, 0]].numpy().tolist()
        assert found == expected[0][1]
        lengths[alpha] = len(found)
    # Without normalisation short outputs win; a strong penalty favours longer ones.
    assert lengths[0.0] < lengths[2.0]


def test_scores_equal_full_recomputation():
    """Every n-best hypothesis' score equals a from-scratch parallel scoring of its tokens.

    With a beam as wide as the vocabulary allows, caches are reordered at every step; a
    wrong reorder would give hypotheses whose incremental score differs.
    """
    model = tiny_model(target_vocab_size=9, seed=5)
    source = tf.constant([[5, 6, 7, 8, 2], [1, 1, 9, 10, 2], [4, 2, 1, 1, 1]])
    output = beam_search(
        model, source, SearchConfig(beam_size=8, nbest=8, max_len_b=6, length_penalty=0.7)
    )
    for row in range(3):
        for rank in range(8):
            length = int(output.lengths[row, rank])
            target = output.tokens[row, rank, :length].numpy().tolist()
            assert target[-1] == EOS_ID and EOS_ID not in target[:-1]
            expected = sequence_log_prob(model, source[row], target) / length**0.7
            assert output.scores[row, rank].numpy() == pytest.approx(expected, abs=1e-4)
        scores = output.scores[row].numpy()
        assert np.all(np.diff(scores) <= 1e-7)


def test_attention_of_hypotheses_matches_parallel_pass():
    model = tiny_model(target_vocab_size=9, seed=6)
    output = beam_search(
        model, SOURCE, SearchConfig(beam_size=4, nbest=2, max_len_b=5), return_attention=True
    )
    for row in range(2):
        for rank in range(2):
            length = int(output.lengths[row, rank])
            target = output.tokens[row, rank, :length].numpy().tolist()
            _, attention = model(
                {"source": SOURCE[row : row + 1], "target_input": tf.constant([[2] + target[:-1]])},
                return_attention=True,
            )
            np.testing.assert_allclose(
                output.attention[row, rank, :length].numpy(), attention[0].numpy(), atol=1e-5
            )


def test_batch_composition_does_not_change_results():
    model = tiny_model(target_vocab_size=9, seed=7)
    sentence = [5, 6, 7, 2]
    alone = beam_search(
        model, tf.constant([sentence]), SearchConfig(beam_size=3, max_len_a=1.5, max_len_b=2)
    )
    batch = tf.constant(
        [
            [1] * 6 + sentence,
            [4, 5, 6, 7, 8, 9, 10, 4, 5, 2],
            sentence + [1] * 6,
        ]
    )
    together = beam_search(model, batch, SearchConfig(beam_size=3, max_len_a=1.5, max_len_b=2))
    length = int(alone.lengths[0, 0])
    for row in (0, 2):
        assert int(together.lengths[row, 0]) == length
        np.testing.assert_array_equal(
            together.tokens[row, 0, :length].numpy(), alone.tokens[0, 0, :length].numpy()
        )
        assert together.scores[row, 0].numpy() == pytest.approx(
            alone.scores[0, 0].numpy(), abs=1e-5
        )


def test_greedy_is_width_one_argmax():
    model = tiny_model(target_vocab_size=9, seed=8)
    output = beam_search(model, SOURCE, SearchConfig(beam_size=1, max_len_b=6))
    for row in range(2):
        decoder_input = [EOS_ID]
        for _ in range(7):
            logits = model(
                {"source": SOURCE[row : row + 1], "target_input": tf.constant([decoder_input])}
            )[0, -1].numpy()
            logits[PAD_ID] = -np.inf
            if len(decoder_input) == 1:  # min_length=1: no empty output
                logits[EOS_ID] = -np.inf
            if len(decoder_input) == 7:  # the last allowed step only allows </s>
                break
            decoder_input.append(int(np.argmax(logits)))
            if decoder_input[-1] == EOS_ID:
                break
        expected = decoder_input[1:]
        if expected[-1] != EOS_ID:
            expected.append(EOS_ID)
        length = int(output.lengths[row, 0])
        assert output.tokens[row, 0, :length].numpy().tolist() == expected


def test_min_length_unk_penalty_and_max_length():
    model = tiny_model(target_vocab_size=9, seed=9)
    output = beam_search(
        model, SOURCE, SearchConfig(beam_size=3, nbest=3, max_len_b=6, min_length=4)
    )
    assert np.all(output.lengths.numpy() >= 5)
    penalised = beam_search(
        model, SOURCE, SearchConfig(beam_size=3, nbest=3, max_len_b=6, unk_penalty=100.0)
    )
    for row in range(2):
        for rank in range(3):
            tokens = penalised.tokens[row, rank, : penalised.lengths[row, rank]].numpy()
            assert UNK_ID not in tokens and PAD_ID not in tokens
    # Per-sentence maximum length a * source_length + b, never beyond the positions.
    lengths = max_output_lengths(SOURCE, 1.5, 1, limit=100).numpy()
    assert lengths.tolist() == [7, 4]  # source lengths 4 and 2, </s> included
    short = beam_search(
        model, SOURCE, SearchConfig(beam_size=2, nbest=2, max_len_a=0.5, max_len_b=0)
    )
    assert np.all(short.lengths.numpy()[0] <= 3) and np.all(short.lengths.numpy()[1] <= 2)
    capped = max_output_lengths(SOURCE, 0.0, 5000, limit=model.decoder.max_length - 1)
    # 40 positions, pad 1: 38 usable decoder inputs, so at most 37 tokens before </s>.
    assert capped.numpy().tolist() == [37, 37]


def test_beam_search_in_tf_function_with_dynamic_shapes():
    model = tiny_model(target_vocab_size=9, seed=10)

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
    def translate(source):
        output = beam_search(model, source, SearchConfig(beam_size=4, nbest=2, max_len_b=5))
        return output.tokens, output.scores

    eager = beam_search(model, SOURCE, SearchConfig(beam_size=4, nbest=2, max_len_b=5))
    tokens, scores = translate(SOURCE)
    np.testing.assert_array_equal(tokens.numpy(), eager.tokens.numpy())
    np.testing.assert_allclose(scores.numpy(), eager.scores.numpy(), atol=1e-6)
    translate(tf.constant([[4, 5, 6, 7, 8, 2]]))
    # One trace serves every batch and source shape.
    assert translate.experimental_get_tracing_count() == 1


def test_xla_compiled_step_gives_the_same_search():
    model = tiny_model(target_vocab_size=9, seed=12)

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
    def search(source):
        output = beam_search(
            model, source, SearchConfig(beam_size=3, nbest=3, max_len_b=6, xla=True)
        )
        return output.tokens, output.scores

    reference = beam_search(model, SOURCE, SearchConfig(beam_size=3, nbest=3, max_len_b=6))
    tokens, scores = search(SOURCE)
    np.testing.assert_array_equal(tokens.numpy(), reference.tokens.numpy())
    np.testing.assert_allclose(scores.numpy(), reference.scores.numpy(), atol=1e-5)


def test_recomputing_every_prefix_gives_the_same_search():
    """The cached windows change nothing: a search without caches finds the same."""
    model = tiny_model(target_vocab_size=9, seed=12)
    source = tf.constant([[5, 6, 7, 8, 2], [1, 1, 9, 10, 2], [4, 2, 1, 1, 1]])
    config = SearchConfig(beam_size=4, max_len_b=6, nbest=3, min_length=2, length_penalty=0.6)
    search = tf.function(lambda source: recompute_beam_search(model, source, config))
    recomputed = search(source)
    reference = beam_search(model, source, config.replace(nbest=3))
    np.testing.assert_array_equal(recomputed.tokens.numpy(), reference.tokens.numpy())
    np.testing.assert_array_equal(recomputed.lengths.numpy(), reference.lengths.numpy())
    np.testing.assert_allclose(recomputed.scores.numpy(), reference.scores.numpy(), atol=1e-5)


def test_n_best_orders_finished_hypotheses_and_trims_columns():
    # One sentence, k = 3 finished slots of width 5; attention over 4 source positions
    # of which the last is padding a compiled step added.
    finished = FinishedHypotheses(
        tokens=tf.constant([[[4, EOS_ID, 1, 1, 1], [4, 5, 6, EOS_ID, 1], [5, EOS_ID, 1, 1, 1]]]),
        scores=tf.constant([[-1.0, -0.5, -2.0]]),
        lengths=tf.constant([[2, 4, 2]]),
    )
    attention = tf.reshape(tf.range(3 * 5 * 4, dtype=tf.float32), [1, 3, 5, 4])
    state = BeamState(*[None] * len(BeamState._fields))._replace(
        finished=finished, finished_attention=attention
    )
    output = n_best(state, nbest=2, source_length=3, return_attention=True)
    assert output.tokens.numpy().tolist() == [[[4, 5, 6, EOS_ID], [4, EOS_ID, 1, 1]]]
    np.testing.assert_array_equal(output.scores.numpy(), [[-0.5, -1.0]])
    assert output.lengths.numpy().tolist() == [[4, 2]]
    np.testing.assert_array_equal(output.attention.numpy()[0, 0], attention.numpy()[0, 1, :4, :3])
    assert n_best(state, nbest=1, source_length=3).attention is None


def test_public_names_import_from_the_package_and_the_module():
    import importlib

    package = importlib.import_module("convs2s_tf.decoding")
    # (The package's `beam_search` attribute is the function, not the module.)
    module = importlib.import_module("convs2s_tf.decoding.beam_search")

    for name in (
        "beam_search",
        "best_hypothesis_function",
        "max_output_lengths",
        "MIN_LENGTH_ERROR",
        "SearchOutput",
        "top_k_with_special_bias",
        "XLA_SOURCE_MULTIPLE",
    ):
        assert getattr(package, name) is getattr(module, name)


def test_bfloat16_search_scores_its_hypotheses_like_float32():
    from convs2s_tf.runs import build_model

    model = tiny_model(target_vocab_size=30, seed=14, scale=0.5)
    bf16 = build_model(model.get_config(), compute_dtype="bfloat16")
    for source, target in zip(model.weights, bf16.weights):
        target.assign(source)
    assert bf16.decoder.compute_dtype == "bfloat16"
    output = beam_search(bf16, SOURCE, SearchConfig(beam_size=3, max_len_b=6))
    tokens, scores = output.tokens.numpy(), output.scores.numpy()
    assert np.all(np.isfinite(scores))
    for row in range(len(tokens)):
        target = [t for t in tokens[row, 0] if t != PAD_ID]
        assert target[-1] == EOS_ID
        exact = sequence_log_prob(model, SOURCE[row], target) / len(target)
        # bfloat16 keeps 8 bits of mantissa: scores agree to a few hundredths.
        assert abs(exact - scores[row, 0]) < 0.05


def test_min_length_beyond_a_sentence_maximum_is_refused():
    from convs2s_tf.decoding import MIN_LENGTH_ERROR

    model = tiny_model(target_vocab_size=9, seed=9)
    # Source lengths 4 and 2: maxima 4 and 2 with a = 1, b = 0; min_length 3 fits only one.
    with pytest.raises(tf.errors.InvalidArgumentError, match=MIN_LENGTH_ERROR):
        beam_search(
            model, SOURCE, SearchConfig(beam_size=2, max_len_a=1.0, max_len_b=0, min_length=3)
        )
    fits = beam_search(
        model, SOURCE[:1], SearchConfig(beam_size=2, max_len_a=1.0, max_len_b=0, min_length=3)
    )
    assert int(fits.lengths[0, 0]) == 4 + 1


def test_nan_log_probabilities_count_as_minus_infinity():
    model = tiny_model(target_vocab_size=9, seed=9)
    expected = beam_search(model, SOURCE, SearchConfig(beam_size=3, nbest=3, max_len_b=6))
    bias = model.decoder.output_projection.bias
    original = bias.numpy()
    # Make token 5 NaN at every step: no hypothesis may hold it, and scores stay finite.
    bias.assign(np.where(np.arange(len(original)) == 5, np.nan, original))
    try:
        output = beam_search(model, SOURCE, SearchConfig(beam_size=3, nbest=3, max_len_b=6))
    finally:
        bias.assign(original)
    assert np.all(np.isfinite(output.scores.numpy()))
    for row in range(2):
        for rank in range(3):
            assert 5 not in output.tokens[row, rank, : output.lengths[row, rank]].numpy()
    assert np.any(expected.tokens.numpy() == 5)  # token 5 would have been chosen
