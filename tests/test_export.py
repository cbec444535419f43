"""Export: the SavedModel's layout, signatures, ops, loaders and its parity with the
checkpoint, each checked in a fresh process that imports only TF and tf-text."""

import json

import numpy as np
import pytest
import tensorflow as tf
from conftest import SEARCH_FLAGS, run_python

from convs2s_tf.decoding import SearchConfig
from convs2s_tf.decoding.translator import Translator
from convs2s_tf.training.loading import load_trained_model

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


def _run(arguments, stdin=None, timeout=600):
    return run_python(arguments, stdin, timeout=timeout)


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
    from tensorflow_serving.apis import prediction_log_pb2

    requests = []
    for record in tf.data.TFRecordDataset(str(version / "assets.extra/tf_serving_warmup_requests")):
        log = prediction_log_pb2.PredictionLog.FromString(record.numpy())
        requests.append(log.predict_log.request)
    assert requests and requests[0].model_spec.signature_name == "serving_default"
    assert tf.make_ndarray(requests[-1].inputs["text"]).shape[0] >= 2
    # A second export takes the next version; the first stays untouched.
    _run(
        ["-m", "pipelines.export", f"--model_dir={tiny_run}", f"--export_dir={exported}"]
        + SEARCH_FLAGS
    )
    assert (exported / "2" / "saved_model.pb").exists()


def test_savedmodel_in_fresh_process_equals_checkpoint(exported, tiny_run):
    result = _run(
        ["-m", "tests.helpers.saved_model_checks", "load", str(exported / "1")],
        stdin=json.dumps(TEXTS),
    )
    outputs = json.loads(result.stdout.strip().splitlines()[-1])
    model, tokenizer, _, _ = load_trained_model(str(tiny_run))
    translator = Translator.from_checkpoint(model, tokenizer, SEARCH_CONFIG)
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


def test_graph_uses_only_core_and_tensorflow_text_ops(exported):
    result = _run(["-m", "tests.helpers.saved_model_checks", "ops", str(exported / "1")])
    ops = json.loads(result.stdout.strip().splitlines()[-1])
    assert ops["other"] == []
    assert "SentencepieceOp" in ops["tensorflow_text"]
    assert not {"PyFunc", "EagerPyFunc", "PyFuncStateless"} & set(ops["used"])
    assert "While" in ops["used"] or "StatelessWhile" in ops["used"]


def test_saved_model_cli_run_uses_the_session_loader(exported):
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
        ]
    )
    assert "translation" in result.stdout and "score" in result.stdout


def test_bad_input_does_not_change_other_translations(tiny_run):
    model, tokenizer, _, _ = load_trained_model(str(tiny_run))
    translator = Translator.from_checkpoint(model, tokenizer, SEARCH_CONFIG)
    mixed = translator.translate(TEXTS)
    assert len(mixed) == len(TEXTS)
    for index in (0, 1, 6):
        alone = translator.translate([TEXTS[index]])[0][0]
        assert mixed[index][0][0] == alone[0]
        assert mixed[index][0][1] == pytest.approx(alone[1], abs=1e-5)
    # Invalid UTF-8 bytes reach the model as bytes, not only as replaced text.
    raw = translator._translate(tf.constant([b"\xff\xfe\xc3 abc", b"A man."]))
    assert raw["translation"].shape == (2,)


def test_bfloat16_xla_export_equals_checkpoint(tiny_run, tmp_path):
    export_dir = tmp_path / "tiny_bf16"
    _run(
        [
            "-m",
            "pipelines.export",
            f"--model_dir={tiny_run}",
            f"--export_dir={export_dir}",
            "--inference_dtype=bfloat16",
            "--xla_decode",
        ]
        + SEARCH_FLAGS
    )
    model, tokenizer, _, _ = load_trained_model(str(tiny_run), compute_dtype="bfloat16")
    in_process = Translator.from_checkpoint(
        model, tokenizer, SEARCH_CONFIG.replace(dtype="bfloat16", xla=True)
    )
    served = Translator.from_saved_model(str(export_dir / "1"))
    assert served.translate(TEXTS, nbest=2) == in_process.translate(TEXTS, nbest=2)
