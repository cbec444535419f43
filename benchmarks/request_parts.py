"""Where a batch-1 request's time goes, part by part, timed without a profiler.

    python -m benchmarks.request_parts --model_dir=runs/multi30k_en_de [--sentences=100] \\
        [--rounds=3]

`benchmarks.step_profile` puts a profiled search's time on its operations, but the
profiler's cost per operation inflates graph mode's small kernels, and a profile does not
say how much of a request lies outside the search loop. This benchmark times the parts
of the batch-1 request of the in-process translator (whose compiled module the default
export also holds), each as its own function called from Python (as `translate` is), over
the first --sentences test sentences sent one at a time (each sentence through every
function in turn, so that the machine's drift falls on all alike), in --rounds rounds
(milliseconds a call):

* call: a function that only returns its input's length, the cost of calling a
  TensorFlow function from Python (which a TF Serving client does not pay);
* tokenization: text to source ids;
* tokenization and encoder: text to the encoder's output and length limits, in graph
  mode as the search runs it (`BucketedSearch.encode`);
* search loop: the compiled search of the one-sentence bucket alone, from the padded
  encoder output to the finished hypotheses;
* request: the whole `translate` signature; less the search loop, what lies outside it
  (tokenization, the encoder, the padding, the bucket's dispatch, picking the best
  hypothesis, detokenisation).

And per step (milliseconds a step): the search loop, less one call, over its steps
(each sentence's steps counted as `benchmarks.float32_floor` counts them); the decoder's
step alone in a bare XLA loop (its cache carried, nothing else), and with the search's
candidates, selection and cache reordering (all of a step but recording the histories);
the same arithmetic written plainly (`bare_step.minimal_step`, on the first sentence's
source without padding or mask, compiled the same way); the float32 floor's products and
selection (`float32_floor.batch1_step_seconds`).
And the search loop's milliseconds of each sentence fitted to a line over its steps: a
cost per step and a cost per call. Medians over rounds, and from them the floor's step
(products and selection) over the loop's, and the loop's part of a request.
Ends with one JSON line.
"""

import json
import os
import statistics
import time
from typing import Any, Callable, NamedTuple

from absl import app, flags

from benchmarks.bare_step import bare_step_timer, minimal_step_timer
from benchmarks.run_files import ROOT, test_sentences

flags.DEFINE_string("model_dir", os.path.join(ROOT, "runs", "multi30k_en_de"), "Trained run.")
flags.DEFINE_integer("sentences", 100, "Test sentences sent one at a time.", lower_bound=1)
flags.DEFINE_integer("rounds", 3, "Alternated rounds; medians are reported.", lower_bound=1)
FLAGS = flags.FLAGS


def _interleaved_ms(functions, inputs):
    """Milliseconds of each call of each of `functions` ({name: (function, inputs)}, the
    outputs fetched; {name: [ms of each input]}), the functions called one after another
    on each input in turn, so that the machine's drift falls on all of them alike."""
    import tensorflow as tf

    times = {name: [] for name in functions}
    for index in range(len(inputs)):
        for name, (function, arguments) in functions.items():
            start = time.perf_counter()
            tf.nest.map_structure(lambda t: t.numpy(), function(*arguments[index]))
            times[name].append(1000.0 * (time.perf_counter() - start))
    return times


def loop_fit(steps, milliseconds):
    """`(per_step, per_call)`: the least-squares line through each sentence's search-loop
    milliseconds against its steps, or `(None, None)` when every sentence takes as many
    steps (no line)."""
    import numpy as np

    if len(set(steps)) < 2:
        return None, None
    slope, intercept = np.polyfit(np.asarray(steps, float), np.asarray(milliseconds), 1)
    return float(slope), float(intercept)


class RequestParts(NamedTuple):
    """The functions a round times: `functions` of one string each ({name: function}),
    `loop_inputs` (a string to the compiled search's padded inputs) and `search_loop`."""

    functions: dict[str, Any]
    loop_inputs: Callable[..., Any]
    search_loop: Callable[..., Any]


def request_parts(module):
    """The `RequestParts` of `module` (a `TranslationModule` with buckets)."""
    import tensorflow as tf

    from convs2s_tf.decoding.compiled_search import pad_rows_and_positions

    search = module.bucketed_search
    text_spec = [tf.TensorSpec([None], tf.string)]

    @tf.function(input_signature=text_spec)
    def call(text):
        return tf.strings.length(text)

    @tf.function(input_signature=text_spec)
    def tokenization(text):
        return module.encode_text(text)

    @tf.function(input_signature=text_spec)
    def encoder(text):
        return search.encode(module.encode_text(text))

    @tf.function(input_signature=text_spec)
    def loop_inputs(text):
        output, max_lengths = search.encode(module.encode_text(text))
        padded = tf.nest.map_structure(
            lambda t: pad_rows_and_positions(t, 1, search.buckets.source_length), output
        )
        return padded, tf.ensure_shape(max_lengths, [1])

    @tf.function
    def search_loop(encoder_output, max_lengths):
        return search.compiled_loop(encoder_output, max_lengths, tf.constant([True]), None)

    functions = {"call": call, "tokenization": tokenization, "tokenization and encoder": encoder}
    return RequestParts(functions, loop_inputs, search_loop)


def time_round(model, module, parts, texts, steps):
    """One round: every part's milliseconds a request and a step (see the module
    docstring), given the `RequestParts` traced, the sentences as `texts` and their
    search `steps`."""
    from benchmarks.float32_floor import batch1_step_seconds

    padded = [parts.loop_inputs(*text) for text in texts]
    # Each function is called from Python, as `translate` is: each time holds one call.
    times = _interleaved_ms(
        {
            **{name: (function, texts) for name, function in parts.functions.items()},
            "search loop": (parts.search_loop, padded),
            "request": (module.translate, texts),
        },
        texts,
    )
    request = {name: statistics.mean(values) for name, values in times.items()}
    per_step, per_call = loop_fit(steps, times["search loop"])
    request["outside the loop"] = request["request"] - request["search loop"]
    products, selection = batch1_step_seconds(model, module.search_config.beam_size)
    search = module.bucketed_search
    beam = module.search_config.beam_size
    unpadded = search.encode(module.encode_text(*texts[0]))[0]
    step = {
        # Less the call from Python, which a loop inside `translate` does not pay.
        "search loop": (request["search loop"] - request["call"]) * len(texts) / sum(steps),
        "decoder step alone": 1000.0 * bare_step_timer(model, search, *padded[0], False)(),
        "decoder step and selection": 1000.0 * bare_step_timer(model, search, *padded[0], True)(),
        "decoder step, minimal form": 1000.0 * minimal_step_timer(model.decoder, unpadded, beam)(),
        "floor products": 1000.0 * products,
        "floor selection": 1000.0 * selection,
    }
    # The loop's time as a cost per step and a cost per call (its first step's cold
    # caches, the launch, the state's set-up), fitted over the sentences' steps.
    fit = {"per step": per_step, "per call": per_call}
    return {"ms_per_request": request, "ms_per_step": step, "search_loop_fit_ms": fit}


def median_parts(rounds):
    """Each part's median over `rounds` (`time_round`'s results), rounded (None where no
    round has a value: a fit of sentences that all take as many steps)."""

    def median(values):
        known = [value for value in values if value is not None]
        return round(statistics.median(known), 3) if known else None

    return {
        kind: {part: median([r[kind][part] for r in rounds]) for part in rounds[0][kind]}
        for kind in rounds[0]
    }


def main(argv):
    del argv
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    from benchmarks.float32_floor import sentence_steps
    from convs2s_tf.decoding.compiled_search import SearchBuckets
    from convs2s_tf.export.translation_module import TranslationModule
    from convs2s_tf.inference import load_inference_model

    try:
        sentences = test_sentences(FLAGS.model_dir, FLAGS.sentences)
    except ValueError as error:
        raise app.UsageError(str(error))
    inference = load_inference_model(FLAGS.model_dir)
    model = inference.model
    module = TranslationModule(
        model, inference.tokenizer, inference.search_config, SearchBuckets(batch_sizes=(1,))
    )
    steps = sentence_steps(model, inference.tokenizer, sentences, inference.search_config)[0]
    parts = request_parts(module)
    texts = [(tf.constant([sentence]),) for sentence in sentences]
    for function in (*parts.functions.values(), module.translate):  # traced: untimed
        function(*texts[0])
    parts.search_loop(*parts.loop_inputs(*texts[0]))
    rounds = []
    for index in range(FLAGS.rounds):
        rounds.append(time_round(model, module, parts, texts, steps.tolist()))
        print(f"round {index + 1}: {json.dumps(rounds[-1])}", flush=True)
    summary = median_parts(rounds)
    summary["steps_per_sentence"] = round(float(steps.mean()), 2)
    step, request = summary["ms_per_step"], summary["ms_per_request"]
    # How near the loop's steps come to the floor's, and how much of a request they are.
    summary["loop_step_share_of_floor"] = round(
        (step["floor products"] + step["floor selection"]) / step["search loop"], 3
    )
    summary["loop_fraction_of_request"] = round(request["search loop"] / request["request"], 3)
    for kind, parts in summary.items():
        if isinstance(parts, dict):
            print(f"\n{kind.replace('_', ' ')} (median of {FLAGS.rounds} rounds):")
            for part, value in parts.items():
                print(f"  {part:<26} " + ("n/a" if value is None else f"{value:8.3f}"))
        else:
            print(f"{kind.replace('_', ' ')}: {parts}")
    print(json.dumps({"rounds": rounds, "summary": summary}))


if __name__ == "__main__":
    app.run(main)
