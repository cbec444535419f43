"""Export: the exporter registry, the SavedModel's layout, signatures, ops, loaders and
its parity with the checkpoint, each checked in a fresh process that imports only TF and
tf-text; the translators over each kind of export."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from conftest import SEARCH_FLAGS, run_python
from helpers.in_process import run_in_process

from convs2s_tf.decoding import SearchConfig
from convs2s_tf.decoding.compiled_search import SearchBuckets
from convs2s_tf.export import (
    find_saved_model,
    list_exporters,
    make_exporter,
    register_exporter,
    write_next_version,
)
from convs2s_tf.export.warmup import read_warmup_requests, replay_warmup_requests
from convs2s_tf.inference import (
    CheckpointTranslator,
    SavedModelTranslator,
    TokenIdsTranslator,
    UnsupportedRequestError,
    load_inference_model,
    open_saved_model,
)
from convs2s_tf.layers.folded_kernels import foldable_layers
from convs2s_tf.runs import load_trained_model

TEXTS = [
    "A man is riding a bicycle.",
    "Two dogs play in the snow.",
    "",
    "   ",
    " ".join(["word"] * 5000),
    "\ufffd\ufffd broken bytes",
    "Smiling 😀🎉 people",
    "Ελληνικά και 中文字符",
]

# The search SEARCH_FLAGS ask for, for the in-process translators.
SEARCH_CONFIG = SearchConfig(beam_size=3, max_len_a=1.2, max_len_b=5)


def _run(arguments, stdin=None, fork_server=None):
    """Runs a pipeline (`["-m", "pipelines.NAME", ...]`) in process; any other module
    (the checks of an export that must load it in a process that never built the model)
    in a subprocess, forked from `fork_server` if given (TensorFlow imported, nothing
    of the library's)."""
    if arguments[1].startswith("pipelines."):
        return run_in_process(arguments, stdin)
    return run_python(arguments, stdin, fork_server=fork_server)


def _warmup_requests(version_dir):
    from tensorflow_serving.apis import prediction_log_pb2

    path = str(version_dir / "assets.extra" / "tf_serving_warmup_requests")
    return [
        prediction_log_pb2.PredictionLog.FromString(record.numpy()).predict_log.request
        for record in tf.data.TFRecordDataset(path)
    ]


def test_registry_names_the_exporters_and_refuses_unknown_or_duplicate_names():
    assert list_exporters() == ["ensemble", "text", "token_ids"]
    with pytest.raises(
        ValueError, match="Unknown exporter 'nope'; known: ensemble, text, token_ids"
    ):
        make_exporter("nope")
    with pytest.raises(ValueError, match="registered already"):
        register_exporter("text")(type(make_exporter("text")))


def test_versions_are_written_atomically(tmp_path):
    base = str(tmp_path / "base")

    def fail(directory):
        tf.io.gfile.makedirs(os.path.join(directory, "variables"))
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        write_next_version(base, fail)
    # The half-written version is removed: no server or export sees it
    # (tests/export/test_saved_model_versions.py races exports).
    assert os.listdir(base) == [] and find_saved_model(base) is None
    version_dir = write_next_version(
        base, lambda directory: tf.io.gfile.makedirs(os.path.join(directory, "variables"))
    )
    assert version_dir == os.path.join(base, "1")
    assert sorted(os.listdir(base)) == ["1", "batching_parameters.txt", "models.config"]
    assert 'name: "base"' in (tmp_path / "base" / "models.config").read_text()


@pytest.mark.slow  # a second export
def test_export_layout_and_next_version(exported, tiny_run):
    version = exported / "1"
    for path in (
        "saved_model.pb",
        "variables/variables.index",
        "assets.extra/tf_serving_warmup_requests",
    ):
        assert (version / path).exists(), path
    assert 'name: "tiny"' in (exported / "models.config").read_text()
    assert "max_batch_size" in (exported / "batching_parameters.txt").read_text()
    requests = _warmup_requests(version)
    # serving_default in every compiled bucket (1, 2, 4, 8 sentences) and once beyond
    # them, then each other signature once.
    batch_sizes = {}
    for request in requests:
        name = request.model_spec.signature_name
        (tensor,) = request.inputs.values()
        batch_sizes.setdefault(name, []).append(tf.make_ndarray(tensor).shape[0])
    assert requests[0].model_spec.signature_name == "serving_default"
    assert batch_sizes == {
        "serving_default": [1, 2, 4, 8, 9],
        "translate_nbest": [1],
        "translate_with_attention": [2],
        "translate_ids": [1],
    }
    assert {request.model_spec.name for request in requests} == {"tiny"}
    # A second export takes the next version; the first stays untouched.
    _run(
        ["-m", "pipelines.export", f"--model_dir={tiny_run}", f"--export_dir={exported}"]
        + SEARCH_FLAGS
    )
    assert (exported / "2" / "saved_model.pb").exists()


def test_the_export_stores_each_weight_once(exported, tiny_run):
    stored = {
        name: shape
        for name, shape in tf.train.list_variables(str(exported / "1" / "variables" / "variables"))
        if "OBJECT_GRAPH" not in name
    }
    assert all(name.startswith(("model_variables/", "folded_kernels/")) for name in stored)
    model = load_inference_model(str(tiny_run)).model
    foldable = foldable_layers(model)
    replaced = {id(v) for layer in foldable for v in layer.folded_variables}
    # Every weight but those a folded kernel stands for (v and g of each weight-normalised
    # layer), and the folded kernels, once.
    expected = sum(int(np.prod(v.shape)) for v in model.variables if id(v) not in replaced)
    expected += sum(int(np.prod(layer.folded_kernel_shape)) for layer in foldable)
    assert sum(int(np.prod(shape)) for shape in stored.values()) == expected


def test_warmup_requests_follow_the_buckets():
    requests = make_exporter("text", buckets=SearchBuckets((1, 3), 16)).warmup_requests()
    sizes = [
        request.inputs["text"].shape[0]
        for request in requests
        if request.signature_name == "serving_default"
    ]
    assert sizes == [1, 3, 4]
    # Without compiled buckets: one sentence, then a batch.
    requests = make_exporter("token_ids", buckets=None).warmup_requests()
    assert [request.inputs["source_ids"].shape[0] for request in requests] == [1, 2]


def test_only_float32_exports_compile_their_small_batches():
    # XLA rounds bfloat16 otherwise than oneDNN: a bfloat16 export keeps graph mode, so
    # its translations stay those of the bfloat16 checkpoint at every batch size.
    exporter = make_exporter("text")
    assert exporter.compiled_buckets(SearchConfig()) == SearchBuckets()
    assert exporter.compiled_buckets(SearchConfig(dtype="bfloat16")) is None
    assert make_exporter("token_ids", buckets=None).compiled_buckets(SearchConfig()) is None


def test_int8_exports_compile_large_batches_too():
    # Graph mode would multiply int8 weights in float32 and pay for rounding the rows;
    # compiled, they reach the CPU's 8-bit units at every batch size.
    int8 = SearchConfig(int8_weights=True)
    exporter = make_exporter("text")
    assert exporter.compiled_buckets(int8).batch_sizes == (1, 2, 4, 8, 16, 32, 64, 128)
    assert exporter.warmup_batch_sizes(int8) == [1, 2, 4, 8, 16, 32, 64, 128, 129]
    assert make_exporter("text", buckets=SearchBuckets((1, 16))).compiled_buckets(
        int8
    ).batch_sizes == (1, 16, 32, 64, 128)
    assert make_exporter("text", buckets=None).compiled_buckets(int8) is None


class _Recorder:
    """A loaded SavedModel's stand-in whose signatures record their calls; `failing`
    names one that raises."""

    def __init__(self, failing=None):
        self.calls = []

        def signature(name):
            def call(**inputs):
                if name == failing:
                    raise RuntimeError(f"{name} failed")
                self.calls.append((name, sorted(inputs)))

            return call

        names = ("serving_default", "translate_nbest", "translate_ids")
        self.signatures = {name: signature(name) for name in names}


# Every warm-up request of a signature the tiny export has, in its file's order (it has
# no translate_with_attention).
_REPLAYED = [("serving_default", ["text"])] * 5 + [
    ("translate_nbest", ["text"]),
    ("translate_ids", ["source_ids"]),
]


def test_loading_replays_the_warmup_requests_in_order(exported):
    recorder = _Recorder()
    replay_warmup_requests(recorder, str(exported / "1"), threads=1)
    assert recorder.calls == _REPLAYED
    assert read_warmup_requests(str(exported)) == []  # a base directory has none


def test_threads_replay_every_warmup_request_once_and_raise_its_error(exported):
    for threads in (3, None):  # None: one per CPU core
        recorder = _Recorder()
        replay_warmup_requests(recorder, str(exported / "1"), threads=threads)
        assert sorted(recorder.calls) == sorted(_REPLAYED)
    with pytest.raises(RuntimeError, match="translate_ids failed"):
        replay_warmup_requests(_Recorder("translate_ids"), str(exported / "1"), threads=3)
    with pytest.raises(ValueError, match="threads must be >= 1, got 0"):
        replay_warmup_requests(recorder, str(exported / "1"), threads=0)


@pytest.mark.slow  # loads the export in a process of its own
def test_savedmodel_in_fresh_process_equals_checkpoint(exported, tiny_run, fork_server):
    result = _run(
        ["-m", "tests.helpers.saved_model_checks", "load", str(exported / "1")],
        stdin=json.dumps(TEXTS),
        fork_server=fork_server,
    )
    outputs = json.loads(result.stdout.strip().splitlines()[-1])
    model, tokenizer, _, _ = load_trained_model(str(tiny_run))
    translator = CheckpointTranslator(model, tokenizer, SEARCH_CONFIG)
    expected = translator.translate(TEXTS)
    served = outputs["serving_default"]
    assert served["translation"] == [hypotheses[0][0] for hypotheses in expected]
    np.testing.assert_allclose(served["score"], [h[0][1] for h in expected], atol=1e-5)
    # Every input, however odd, got a finite score.
    assert len(served["score"]) == len(TEXTS) and np.all(np.isfinite(served["score"]))
    nbest = outputs["translate_nbest"]
    assert len(nbest["translations"]) == len(TEXTS) * 3
    assert nbest["translations"][::3] == served["translation"]
    attention = outputs["translate_with_attention"]
    assert attention["translation"] == served["translation"]
    assert len(outputs["translate_ids"]["output_ids"]) == 2


@pytest.mark.slow  # reads the export's ops in a process of its own
def test_graph_uses_only_core_and_tensorflow_text_ops(exported, fork_server):
    command = ["-m", "tests.helpers.saved_model_checks", "ops", str(exported / "1")]
    result = _run(command, fork_server=fork_server)
    ops = json.loads(result.stdout.strip().splitlines()[-1])
    assert ops["other"] == []
    assert "SentencepieceOp" in ops["tensorflow_text"]
    assert not {"PyFunc", "EagerPyFunc", "PyFuncStateless"} & set(ops["used"])
    assert "While" in ops["used"] or "StatelessWhile" in ops["used"]


@pytest.mark.slow  # runs saved_model_cli in a process of its own
def test_saved_model_cli_run_uses_the_session_loader(exported, fork_server):
    result = _run(
        [
            "-m",
            "tests.helpers.saved_model_checks",
            "cli",
            "run",
            "--dir",
            str(exported / "1"),
            "--tag_set",
            "serve",
            "--signature_def",
            "serving_default",
            "--input_exprs",
            'text=["A man is riding a bicycle.", ""]',
        ],
        fork_server=fork_server,
    )
    assert "translation" in result.stdout and "score" in result.stdout


def test_bad_input_does_not_change_other_translations(tiny_run):
    model, tokenizer, _, _ = load_trained_model(str(tiny_run))
    translator = CheckpointTranslator(model, tokenizer, SEARCH_CONFIG)
    mixed = translator.translate(TEXTS)
    assert len(mixed) == len(TEXTS)
    for index in (0, 1, 6):
        alone = translator.translate([TEXTS[index]])[0][0]
        assert mixed[index][0][0] == alone[0]
        assert mixed[index][0][1] == pytest.approx(alone[1], abs=1e-5)
    # Invalid UTF-8 bytes reach the model as bytes, not only as replaced text.
    raw = translator.translate([b"\xff\xfe\xc3 abc", b"A man."])
    assert [len(hypotheses) for hypotheses in raw] == [1, 1]


@pytest.mark.slow  # an export of its own
def test_bfloat16_export_equals_checkpoint(tiny_run, tmp_path):
    export_dir = tmp_path / "tiny_bf16"
    arguments = ["-m", "pipelines.export", f"--model_dir={tiny_run}", f"--export_dir={export_dir}"]
    _run(arguments + ["--inference_dtype=bfloat16"] + SEARCH_FLAGS)
    model, tokenizer, _, _ = load_trained_model(str(tiny_run), compute_dtype="bfloat16")
    in_process = CheckpointTranslator(model, tokenizer, SEARCH_CONFIG.replace(dtype="bfloat16"))
    # The base directory: its newest (bfloat16 exports have no compiled buckets).
    served = open_saved_model(str(export_dir), warm_up=False)
    assert isinstance(served, SavedModelTranslator) and served.beam_size == 3
    assert served.translate(TEXTS, nbest=2) == in_process.translate(TEXTS, nbest=2)
    with pytest.raises(UnsupportedRequestError, match="the SavedModel's beam size 3"):
        served.check_request(nbest=4)


def test_an_export_that_would_compile_without_bound_is_refused(tiny_run, tmp_path):
    # Before anything is traced or written: XLA programs per request shape have no bound.
    arguments = ["-m", "pipelines.export", f"--model_dir={tiny_run}", "--xla_decode"]
    refused = run_in_process(arguments + [f"--export_dir={tmp_path / 'x'}"], check=False)
    assert refused.returncode == 2 and "--xla_decode is for pipelines.translate" in refused.stderr
    assert not (tmp_path / "x").exists()
    model, _, _, _ = load_trained_model(str(tiny_run))
    with pytest.raises(ValueError, match="cannot search with xla"):
        make_exporter("text").export(
            model, str(tmp_path / "y"), search_config=SEARCH_CONFIG.replace(xla=True)
        )
    assert not (tmp_path / "y").exists()


@pytest.mark.slow  # an export of its own
def test_token_ids_export_translates_as_the_checkpoint(tiny_run, tmp_path):
    from convs2s_tf.interop import VocabularyTokenizer
    from convs2s_tf.interop.fairseq_dictionary import Dictionary
    from convs2s_tf.runs import VocabularyFiles

    model, _, _, _ = load_trained_model(str(tiny_run))
    # Dictionaries as an imported run's, sized to the model's vocabulary.
    dictionary = Dictionary.from_tokens([f"w{i}" for i in range(model.decoder.vocab_size - 4)])
    dictionary.save(str(tmp_path / "dict.txt"))
    files = VocabularyFiles("fairseq_dictionary", *[str(tmp_path / "dict.txt")] * 2, None)
    version_dir = make_exporter("token_ids").export(
        model, str(tmp_path / "ids"), vocabulary_files=files, search_config=SEARCH_CONFIG
    )
    extra = sorted(p.name for p in (tmp_path / "ids" / "1" / "assets.extra").iterdir())
    assert extra == ["source_dict.txt", "target_dict.txt", "tf_serving_warmup_requests"]
    requests = _warmup_requests(tmp_path / "ids" / "1")
    assert {request.model_spec.signature_name for request in requests} == {"translate_ids"}
    assert tf.make_ndarray(requests[-1].inputs["source_ids"]).dtype == np.int32
    served = open_saved_model(version_dir, warm_up=False)
    assert isinstance(served, TokenIdsTranslator)
    for request in ({"nbest": 2}, {"attention": True}):
        with pytest.raises(UnsupportedRequestError, match="translate_ids signature only"):
            served.check_request(**request)
    with pytest.raises(UnsupportedRequestError, match="translate_ids signature only"):
        served.translate_with_attention(["w1"])
    lines = ["w4 w5 w6", "w10 never-seen w11", ""]
    tokenizer = VocabularyTokenizer(dictionary, dictionary)
    expected = CheckpointTranslator(model, tokenizer, SEARCH_CONFIG).translate(lines)
    translations = served.translate(lines)
    assert [h[0][0] for h in translations] == [h[0][0] for h in expected]
    np.testing.assert_allclose(
        [h[0][1] for h in translations], [h[0][1] for h in expected], atol=1e-5
    )


@pytest.mark.slow  # an export of its own
def test_int8_export_stores_int8_kernels_and_translates_as_the_checkpoint(tiny_run, tmp_path):
    export_dir = tmp_path / "tiny_int8"
    _run(
        [
            "-m",
            "pipelines.export",
            f"--model_dir={tiny_run}",
            f"--export_dir={export_dir}",
            "--int8_weights",
        ]
        + SEARCH_FLAGS
    )
    reader = tf.train.load_checkpoint(str(export_dir / "1" / "variables" / "variables"))
    dtypes = reader.get_variable_to_dtype_map()
    model, tokenizer, _, _ = load_trained_model(str(tiny_run))
    # Every folded kernel as int8 values and float32 scales, nothing else in int8.
    int8_names = sorted(name for name, dtype in dtypes.items() if dtype == tf.int8)
    assert len(int8_names) == len(foldable_layers(model))
    assert all(name.startswith("folded_kernels/") for name in int8_names)
    in_process = CheckpointTranslator(model, tokenizer, SEARCH_CONFIG.replace(int8_weights=True))
    served = open_saved_model(str(export_dir), warm_up=False)  # compiles what it translates
    # The whole list (graph mode) and one sentence (a compiled bucket) alike: the same
    # hypotheses, scores within float32 rounding.
    for texts in (TEXTS, TEXTS[:1]):
        served_hypotheses = served.translate(texts, nbest=2)
        expected = in_process.translate(texts, nbest=2)
        assert [[h[0] for h in hs] for hs in served_hypotheses] == [
            [h[0] for h in hs] for hs in expected
        ]
        np.testing.assert_allclose(
            [[h[1] for h in hs] for hs in served_hypotheses],
            [[h[1] for h in hs] for hs in expected],
            atol=1e-4,
        )
    assert served.translate(TEXTS[:1])[0][0][0] == served.translate(TEXTS)[0][0][0]
