"""benchmarks.request_floor: a request of the floor's work (its timings are
`benchmarks.floor_share`'s)."""

import tensorflow as tf

from benchmarks.request_floor import RequestFloor
from convs2s_tf.export.translation_module import TranslationModule
from convs2s_tf.inference import load_inference_model


def test_a_request_returns_one_stand_in_piece_per_step(tiny_run):
    inference = load_inference_model(str(tiny_run))
    module = TranslationModule(inference.model, inference.tokenizer, inference.search_config)
    floor = RequestFloor(inference.model, module, beam=2, max_source_length=16)
    sentences, steps = ["a man", "a dog runs", "a man"], [3, 5, 4]
    times = floor.milliseconds(sentences, steps)
    assert len(times) == 3 and all(t > 0 for t in times)
    for sentence, count in zip(sentences, steps):
        expected = inference.tokenizer.decode(tf.range(4, 4 + count)[None, :])[0]
        assert floor.translate(sentence, count) == expected.numpy()
    # Traced once: XLA compiles it per source length, not per request.
    assert floor._program.experimental_get_tracing_count() == 1
