"""The in-process translator's compiled buckets: compiled now with warm-up, else on a
bucket's second batch; the same translations as its graph-mode search either way."""

import pytest

from convs2s_tf.decoding import SearchConfig
from convs2s_tf.inference import load_inference_model

SEARCH = SearchConfig(beam_size=3, max_len_a=1.2, max_len_b=5)
TEXTS = ["A man is riding a bicycle.", "Two dogs play in the snow.", "", "A girl smiles."]


@pytest.fixture(scope="module")
def inference(tiny_run):
    return load_inference_model(str(tiny_run), search_config=SEARCH)


@pytest.fixture(scope="module")
def graph_translations(inference):
    """Each batch of TEXTS[:n] and its 3-best, translated in graph mode only."""
    from convs2s_tf.inference import CheckpointTranslator

    graph = CheckpointTranslator(inference.model, inference.tokenizer, SEARCH, buckets=None)
    return {n: (graph.translate(TEXTS[:n]), graph.translate(TEXTS[:n], nbest=3)) for n in (1, 3, 4)}


def _assert_same(actual, expected):
    for actual_row, expected_row in zip(actual, expected, strict=True):
        assert [text for text, _ in actual_row] == [text for text, _ in expected_row]
        for (_, actual_score), (_, expected_score) in zip(actual_row, expected_row):
            assert actual_score == pytest.approx(expected_score, abs=1e-4)


@pytest.mark.slow  # over ten seconds on 2 cores
def test_a_bucket_compiles_on_its_second_batch_without_warm_up(inference, graph_translations):
    translator = inference.translator(warm_up=False)
    assert translator.warmup_seconds == 0.0
    # A one-off small batch is searched in graph mode: nothing compiled.
    _assert_same(translator.translate(TEXTS[:1]), graph_translations[1][0])
    assert not translator._compiled_functions
    # A batch above the buckets never compiles anything.
    translator.translate(TEXTS * 3)
    assert not translator._compiled_functions
    # The bucket's second batch (here a 3-best one) runs compiled, with the same results.
    _assert_same(translator.translate(TEXTS[:1], nbest=3), graph_translations[1][1])
    assert translator._compiled_functions
    # Another bucket (3 sentences pad to 4): graph mode first, compiled the second time.
    for _ in range(2):
        _assert_same(translator.translate(TEXTS[:3]), graph_translations[3][0])
    assert translator._bucket_batches == {1: 2, 4: 2}


@pytest.mark.slow  # over ten seconds on 2 cores
def test_buckets_compile_while_another_thread_searches(inference, graph_translations):
    # translate_all searches two batches at once, from two threads: here one thread
    # traces the compiled search while the other traces or runs the graph-mode one.
    translator = inference.translator(warm_up=False)
    texts = [TEXTS[0]] * 6
    expected = graph_translations[1][0][0][0][0]
    assert translator.translate_all(texts, batch_size=1) == [expected] * 6
    assert translator._compiled_functions


@pytest.mark.slow  # over ten seconds on 2 cores
def test_warm_up_compiles_every_bucket_at_load(inference, graph_translations):
    translator = inference.translator()
    assert translator.warmup_seconds > 0.0 and translator._compiled_functions
    for n, (best, nbest) in graph_translations.items():
        _assert_same(translator.translate(TEXTS[:n]), best)
        _assert_same(translator.translate(TEXTS[:n], nbest=3), nbest)
    # Attention comes from the graph-mode search, at any batch size.
    assert len(translator.translate_with_attention(TEXTS[:1])) == 1


def test_a_bfloat16_search_never_compiles(tiny_run):
    inference = load_inference_model(str(tiny_run), search_config=SEARCH.replace(dtype="bfloat16"))
    translator = inference.translator()
    for _ in range(2):
        translator.translate(TEXTS[:1])
    assert not translator._compiled_functions
