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

With --search_batch_size, each round also times the in-process search of the whole test
split, sorted by length, in batches of that size (graph mode above the one-sentence
bucket), and sets it against the sum of its steps at fixed rows: each step of each batch
at the number of sentences it still searches (`float32_floor.active_rows`), its time
interpolated between the round's `--sentences` (which must run from 1 to the batch
size), in graph mode and at the floor. What the search takes beyond the sum is what it
does besides its steps: the encoder, recording histories, dropping done sentences.
Ends with one JSON line.
"""

import json
import os
import statistics
import time

import numpy as np
from absl import app, flags

from benchmarks.bare_step import bare_step_timer
from benchmarks.run_files import ROOT, index_batches, length_order, test_sentences

flags.DEFINE_string("model_dir", os.path.join(ROOT, "runs", "multi30k_en_de"), "Trained run.")
flags.DEFINE_list("sentences", ["8", "32", "128"], "Sentence counts of the timed steps.")
flags.DEFINE_integer("rounds", 3, "Alternated rounds; medians are reported.", lower_bound=1)
flags.DEFINE_integer(
    "search_batch_size",
    0,
    "Also time, in each round, the search of the whole test split sorted by length in "
    "batches of this size, against its steps at fixed rows (0: not).",
    lower_bound=0,
)
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
        # Built once: every round times the same traced loop.
        return bare_step_timer(model, search, inputs[xla], max_lengths, selection, xla)

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


def search_seconds(module, batches):
    """Seconds of `module`'s search of every batch (lists of strings) in turn."""
    import tensorflow as tf

    start = time.perf_counter()
    for batch in batches:
        module.translate(tf.constant(batch))["translation"].numpy()
    return time.perf_counter() - start


def steps_seconds(active, counts, step_ms):
    """Seconds of steps of `active` sentences each, `step_ms` (ms at each of `counts`
    sentences) interpolated between `counts`."""
    return float(np.sum(np.interp(active, counts, step_ms))) / 1000.0


def search_round(module, batches, active, counts, parts):
    """One round's search against its steps (`parts`: {count: {part: ms}} of the round)."""
    graph = [parts[count]["step and selection, graph"] for count in counts]
    floor = [parts[count]["floor products"] + parts[count]["floor selection"] for count in counts]
    return {
        "search_seconds": round(search_seconds(module, batches), 3),
        "graph_steps_seconds": round(steps_seconds(active, counts, graph), 3),
        "floor_steps_seconds": round(steps_seconds(active, counts, floor), 3),
    }


def summarise_search(rounds):
    """Medians over `rounds` (`search_round`'s) and the shares made of them."""
    median = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
    return {
        **{key: round(value, 3) for key, value in median.items()},
        "steps_share_of_search": round(median["graph_steps_seconds"] / median["search_seconds"], 3),
        "floor_share_of_search": round(median["floor_steps_seconds"] / median["search_seconds"], 3),
        "floor_share_of_steps": round(
            median["floor_steps_seconds"] / median["graph_steps_seconds"], 3
        ),
    }


def search_batches(inference, batch_size):
    """`(batches, active)`: the test split sorted by length in batches of `batch_size`,
    and the number of sentences each step of their searches still searches."""
    from benchmarks.float32_floor import active_rows, sentence_steps

    sentences = test_sentences(FLAGS.model_dir)
    indices = index_batches(length_order([len(sentence) for sentence in sentences]), batch_size)
    search = inference.search_config
    steps = sentence_steps(inference.model, inference.tokenizer, sentences, search)[0]
    active = active_rows(steps, indices, search.beam_size) // search.beam_size
    return [[sentences[index] for index in batch] for batch in indices], active


def print_table(counts, results):
    """The medians and shares of every count, a column each."""
    print(f"\nmilliseconds a step (median of {FLAGS.rounds} rounds):")
    print(f"  {'':<28}" + "".join(f"{count:>10}" for count in counts))
    for part in PARTS:
        values = [results[str(count)]["summary"]["ms_per_step"][part] for count in counts]
        print(f"  {part:<28}" + "".join(f"{value:10.3f}" for value in values))
    for key in ("graph_share_of_floor", "xla_share_of_floor", "xla_speedup"):
        values = [results[str(count)]["summary"][key] for count in counts]
        print(f"  {key.replace('_', ' '):<28}" + "".join(f"{value:10.3f}" for value in values))


def main(argv):
    del argv
    import tensorflow_text  # noqa: F401

    from convs2s_tf.decoding.compiled_search import SearchBuckets
    from convs2s_tf.export.translation_module import TranslationModule
    from convs2s_tf.inference import load_inference_model

    try:
        counts = sorted(int(count) for count in FLAGS.sentences)
        sentences = test_sentences(FLAGS.model_dir, max(counts))
    except ValueError as error:
        raise app.UsageError(f"--sentences: {error}")
    batch_size = FLAGS.search_batch_size
    if batch_size and (min(counts) != 1 or max(counts) < batch_size):
        # The search's steps are interpolated between the counts timed.
        raise app.UsageError(
            f"--search_batch_size={batch_size} needs --sentences from 1 to at least {batch_size}"
        )
    inference = load_inference_model(FLAGS.model_dir)
    module = TranslationModule(
        inference.model, inference.tokenizer, inference.search_config, SearchBuckets((1,))
    )
    batches = active = None
    if batch_size:
        batches, active = search_batches(inference, batch_size)
        search_seconds(module, batches)  # traced: untimed
    functions = {
        count: step_functions(inference.model, module, sentences[:count]) for count in counts
    }
    rounds, search_rounds = {count: [] for count in counts}, []
    for index in range(FLAGS.rounds):
        for count in counts:
            rounds[count].append(
                {part: round(1000.0 * functions[count][part](), 3) for part in PARTS}
            )
            print(
                f"{count} sentences, round {index + 1}: {json.dumps(rounds[count][-1])}", flush=True
            )
        if batches:
            parts = {count: rounds[count][-1] for count in counts}
            search_rounds.append(search_round(module, batches, active, counts, parts))
            print(f"search, round {index + 1}: {json.dumps(search_rounds[-1])}", flush=True)
    results = {
        str(count): {"rounds": rounds[count], "summary": summarise(rounds[count])}
        for count in counts
    }
    print_table(counts, results)
    if batches:
        summary = summarise_search(search_rounds)
        results["search"] = {
            "batch_size": batch_size,
            "steps": int(len(active)),
            "rounds": search_rounds,
            "summary": summary,
        }
        print(f"\nthe test split in batches of {batch_size} (medians):")
        for key, value in summary.items():
            print(f"  {key.replace('_', ' '):<28}{value:10.3f}")
    print(json.dumps(results))


if __name__ == "__main__":
    app.run(main)
