"""Where a batched step's time goes, at fixed rows, timed without a profiler.

    python -m benchmarks.batch_step_parts --model_dir=runs/multi30k_en_de \\
        [--sentences=8,32,128] [--rounds=3]

`benchmarks.floor_share` finds the batch-128 search further from its floor than the
batch-1 one, and a profile of a graph-mode search blurs its parts: graph mode runs
independent kernels on both cores at once, and the profiler inflates small kernels. This
benchmark takes the step apart at fixed rows instead: for each count in --sentences (the
first test sentences, `beam_size` rows each, none dropped), in --rounds rounds that time
each part right after the others (milliseconds a step, `benchmarks.bare_step`):

* decoder step: the decoder's step alone in a loop, its cache carried, in graph mode
  (what a search of more sentences than the compiled buckets hold runs) and compiled by
  XLA (the source padded to the buckets' positions, as a compiled bucket pads it);
* step and selection: the same with the search's candidates, selection and cache
  reordering (all of a search step but recording the histories);
* floor products, floor selection: the float32 floor's decoder products at the same
  rows and its beam selection of the same sentences, each the faster of XLA and graph
  mode (`benchmarks.float32_floor`).

Medians over rounds, and from them each mode's share of the floor (floor products and
selection over step and selection) and the compiled step's speed-up over graph mode.
Ends with one JSON line.
"""

import json
import os
import statistics

from absl import app, flags

from benchmarks.bare_step import bare_step_seconds
from benchmarks.run_files import ROOT, test_sentences

flags.DEFINE_string("model_dir", os.path.join(ROOT, "runs", "multi30k_en_de"), "Trained run.")
flags.DEFINE_list("sentences", ["8", "32", "128"], "Sentence counts of the timed steps.")
flags.DEFINE_integer("rounds", 3, "Alternated rounds; medians are reported.", lower_bound=1)
FLAGS = flags.FLAGS

PARTS = (
    "decoder step, graph",
    "decoder step, XLA",
    "step and selection, graph",
    "step and selection, XLA",
    "floor products",
    "floor selection",
)


def step_functions(model, module, sentences):
    """{part: function returning seconds a step} for `sentences` (strings)."""
    import tensorflow as tf

    from benchmarks.float32_floor import _decoder_matrices, selection_seconds, step_product_seconds
    from convs2s_tf.decoding.compiled_search import pad_rows_and_positions

    search = module.bucketed_search
    count, beam = len(sentences), search.constants.beam_size
    encoder_output, max_lengths = search.encode(module.encode_text(tf.constant(sentences)))
    # As a compiled bucket pads it (a longer source keeps its length).
    positions = max(search.buckets.source_length, tf.nest.flatten(encoder_output)[0].shape[1])
    padded = tf.nest.map_structure(
        lambda t: pad_rows_and_positions(t, count, positions), encoder_output
    )
    inputs = {False: encoder_output, True: padded}
    decoder = _decoder_matrices(model.decoder)

    def bare(selection, xla):
        return lambda: bare_step_seconds(model, search, inputs[xla], max_lengths, selection, xla)

    return {
        "decoder step, graph": bare(False, False),
        "decoder step, XLA": bare(False, True),
        "step and selection, graph": bare(True, False),
        "step and selection, XLA": bare(True, True),
        "floor products": lambda: min(
            step_product_seconds(decoder, count * beam, xla) for xla in (True, False)
        ),
        "floor selection": lambda: min(
            selection_seconds(model.decoder.vocab_size, beam, count, xla) for xla in (True, False)
        ),
    }


def summarise(rounds):
    """Each part's median over `rounds` (`[{part: ms}]`) and the shares made of them."""
    median = {part: round(statistics.median(r[part] for r in rounds), 3) for part in PARTS}
    floor = median["floor products"] + median["floor selection"]
    return {
        "ms_per_step": median,
        "graph_share_of_floor": round(floor / median["step and selection, graph"], 3),
        "xla_share_of_floor": round(floor / median["step and selection, XLA"], 3),
        "xla_speedup": round(
            median["step and selection, graph"] / median["step and selection, XLA"], 3
        ),
    }


def main(argv):
    del argv
    import tensorflow_text  # noqa: F401

    from convs2s_tf.decoding.compiled_search import SearchBuckets
    from convs2s_tf.export.translation_module import TranslationModule
    from convs2s_tf.inference import load_inference_model

    try:
        counts = [int(count) for count in FLAGS.sentences]
        sentences = test_sentences(FLAGS.model_dir, max(counts))
    except ValueError as error:
        raise app.UsageError(f"--sentences: {error}")
    inference = load_inference_model(FLAGS.model_dir)
    module = TranslationModule(
        inference.model, inference.tokenizer, inference.search_config, SearchBuckets((1,))
    )
    results = {}
    for count in counts:
        functions = step_functions(inference.model, module, sentences[:count])
        rounds = []
        for index in range(FLAGS.rounds):
            rounds.append({part: round(1000.0 * functions[part](), 3) for part in PARTS})
            print(f"{count} sentences, round {index + 1}: {json.dumps(rounds[-1])}", flush=True)
        results[str(count)] = {"rounds": rounds, "summary": summarise(rounds)}
    print(f"\nmilliseconds a step (median of {FLAGS.rounds} rounds):")
    print(f"  {'':<28}" + "".join(f"{count:>10}" for count in counts))
    for part in PARTS:
        values = [results[str(count)]["summary"]["ms_per_step"][part] for count in counts]
        print(f"  {part:<28}" + "".join(f"{value:10.3f}" for value in values))
    for key in ("graph_share_of_floor", "xla_share_of_floor", "xla_speedup"):
        values = [results[str(count)]["summary"][key] for count in counts]
        print(f"  {key.replace('_', ' '):<28}" + "".join(f"{value:10.3f}" for value in values))
    print(json.dumps(results))


if __name__ == "__main__":
    app.run(main)
