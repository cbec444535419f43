"""Where a beam step's time goes: TensorFlow's profiler on the search, op by op.

    python -m benchmarks.step_profile [--model_dir=runs/multi30k_en_de]
        [--saved_model=DIR] [--latency_sentences=20] [--batch_size=128]

Profiles the two translators users meet, each in this process after an untimed first
call: the default export (`pipelines.export` to a temporary directory unless
--saved_model names one; loaded with `open_saved_model`) and the in-process translator
of `pipelines.translate` and `evaluate` (`load_inference_model(...).translator()`).
Each translates the first --latency_sentences test sentences one request at a time
(batch 1), then the first --batch_size test sentences as one request (batch 128), under
`tf.profiler`.

Every operation the profiler records (a TensorFlow kernel in graph mode, an XLA thunk in
a compiled search, named back to its TensorFlow op through XLA's HLO dump) is put in one
of these parts, by the name scopes the search sets (`decoder_step`, `selection`,
`reorder_cache`, `bookkeeping`) and by its kind:

* products: the matrix products with the model's weights (vocabulary projection
  included);
* attention: the rest of the attention layers (scores, softmax, context);
* selection: each step's candidates and beam selection;
* cache reordering: the gathers that reorder the convolution windows by beam;
* bookkeeping: everything else (embeddings, windows, token histories, loop control);
* overhead: wall time in which no operation runs (dispatch, Python, the executor).

It prints each part in microseconds per step (a step: one iteration of the search loop;
at batch 1, summed over the requests) and as a share of the wall time, and ends with one
JSON line. Run it alone on the machine: a profile of a shared CPU says nothing.
"""

import os
import tempfile

# The HLO dump names each XLA thunk's TensorFlow op; it must be asked for before
# TensorFlow starts.
_DUMP_DIR = tempfile.mkdtemp(prefix="step_profile_hlo_")
_XLA_FLAGS = os.environ.get("XLA_FLAGS", "")
os.environ["XLA_FLAGS"] = f"{_XLA_FLAGS} --xla_dump_to={_DUMP_DIR} --xla_dump_hlo_as_text"

import json  # noqa: E402
import shutil  # noqa: E402
import time  # noqa: E402

from absl import app, flags  # noqa: E402

from benchmarks import op_profile  # noqa: E402
from benchmarks.run_files import ROOT, export_default, test_sentences  # noqa: E402

flags.DEFINE_string("model_dir", os.path.join(ROOT, "runs", "multi30k_en_de"), "Trained run.")
flags.DEFINE_string("saved_model", None, "Profile this export instead of a new one.")
flags.DEFINE_integer("latency_sentences", 20, "Test sentences sent one at a time.")
flags.DEFINE_integer("batch_size", 128, "Test sentences sent as one request.")
flags.DEFINE_string(
    "trace_dir", None, "Keep the profiler traces here (TensorBoard's profile tab reads them)."
)
FLAGS = flags.FLAGS


def _search_steps(inference, sentences):
    """Each sentence's search steps (the longest of its finished hypotheses), as
    `benchmarks.float32_floor` counts them, in the in-process translator's search."""
    from benchmarks.float32_floor import sentence_steps

    return sentence_steps(inference.model, inference.tokenizer, sentences, inference.search_config)[
        0
    ].tolist()


def _profile(translator, requests, steps, log_dir):
    """The `StepProfile` of translating `requests` (lists of sentences) in turn; `steps`
    holds each request's sentences' search steps."""
    import tensorflow as tf

    translator.translate(requests[0])  # traces or compiles: untimed
    tf.profiler.experimental.start(log_dir)
    start = time.perf_counter()
    for request in requests:
        translator.translate(request)
    wall_seconds = time.perf_counter() - start
    tf.profiler.experimental.stop()
    return op_profile.step_profile(
        log_dir,
        _DUMP_DIR,
        wall_seconds,
        steps=sum(max(request_steps) for request_steps in steps),
        sentence_steps=sum(sum(request_steps) for request_steps in steps),
    )


def main(argv):
    del argv
    import tensorflow_text  # noqa: F401

    from convs2s_tf.inference import load_inference_model, open_saved_model

    try:
        sentences = test_sentences(FLAGS.model_dir, max(FLAGS.latency_sentences, FLAGS.batch_size))
    except ValueError as error:
        raise app.UsageError(str(error))
    inference = load_inference_model(FLAGS.model_dir)
    steps = _search_steps(inference, sentences)
    batch1 = [[sentence] for sentence in sentences[: FLAGS.latency_sentences]]
    batch1_steps = [[count] for count in steps[: FLAGS.latency_sentences]]
    batched = [sentences[: FLAGS.batch_size]]
    batched_steps = [steps[: FLAGS.batch_size]]
    with tempfile.TemporaryDirectory() as work_dir:
        translators = {
            "export": open_saved_model(
                FLAGS.saved_model
                # The export's modules are not dumped.
                or export_default(
                    FLAGS.model_dir,
                    os.path.join(work_dir, "saved_model"),
                    env=dict(os.environ, XLA_FLAGS=_XLA_FLAGS),
                )
            ),
            "in_process": inference.translator(),
        }
        results = {}
        for name, translator in translators.items():
            for size, requests, request_steps in (
                ("batch1", batch1, batch1_steps),
                (f"batch{FLAGS.batch_size}", batched, batched_steps),
            ):
                log_dir = os.path.join(FLAGS.trace_dir or work_dir, f"{name}_{size}")
                profile = _profile(translator, requests, request_steps, log_dir)
                print(f"\n{name}, {size} ({len(requests)} requests):")
                print(op_profile.format_profile(profile))
                results[f"{name}_{size}"] = profile.as_dict()
    shutil.rmtree(_DUMP_DIR, ignore_errors=True)
    print(json.dumps(results))


if __name__ == "__main__":
    app.run(main)
