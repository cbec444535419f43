"""A PoseNet run through every pipeline: training under MirroredStrategy with a resume,
TensorBoard's attention images, averaging, ensembles, shortlists, bfloat16, both
SavedModel kinds, gRPC serving, and fairseq export's refusal."""

import dataclasses
import json
import re

import grpc
import numpy as np
import pytest
import tensorflow as tf
from conftest import run_python
from helpers.corpora import local_corpus_flags, write_local_corpus
from helpers.in_process import run_in_process
from helpers.subprocesses import start_server, stop_server
from tensorboard.backend.event_processing import event_accumulator
from tensorflow_serving.apis import prediction_service_pb2_grpc

from convs2s_tf.serving.client import predict

# Two decoder layers (two attention images), one encoder layer, 32 wide: seconds a step.
TINY_POSENET = [
    "--family=posenet",
    "--preset=posenet_multi30k_cpu",
    "--hidden_dim=32",
    "--num_heads=2",
    "--ffn_dim=64",
    "--encoder_layers=1",
    "--decoder_layers=2",
    "--optimizer=adam",
    "--warmup=noam",
    "--warmup_steps=20",
    "--learning_rate=0.003",
    "--max_tokens=600",
]
SENTENCES = ["A man is riding a bicycle.", "Two dogs play in the snow.", ""]


@dataclasses.dataclass
class PoseNetRun:
    data_dir: str
    model_dir: str
    first: str  # stdout of the run stopped at step 6
    resumed: str  # stdout of its resumption to step 10


def _train(arguments, fork_server):
    """Trains in a process of its own: MirroredStrategy's CPU replicas are logical
    devices, which only a process that has not run TensorFlow yet can configure (one
    forked from `fork_server` has imported it, nothing more)."""
    return run_python(["-m", "pipelines.train", *arguments], fork_server=fork_server).stdout


def _run(arguments, stdin=None):
    """Runs a pipeline (`["pipelines.NAME", *flags]`) in process; returns its stdout."""
    return run_in_process(arguments, stdin).stdout


# Validation and test pairs: each validation (BLEU at beam 2) and evaluation is seconds.
SPLIT_PAIRS = 8
# The search of every translation and export: short hypotheses of an untrained model.
SEARCH = ["--beam_size=2", "--max_len_a=1.2", "--max_len_b=5"]


@pytest.fixture(scope="module")
def posenet_run(tmp_path_factory, fork_server):
    root = tmp_path_factory.mktemp("posenet")
    corpus = write_local_corpus(root / "corpus", 2000, SPLIT_PAIRS, SPLIT_PAIRS)
    data_dir, model_dir = str(root / "data"), str(root / "run")
    command = [
        *local_corpus_flags(corpus),
        f"--data_dir={data_dir}",
        f"--model_dir={model_dir}",
        *TINY_POSENET,
        "--strategy=mirrored",
        "--cpu_replicas=2",
        "--save_every_steps=3",
        "--keep_checkpoints=3",
        "--valid_beam_size=2",
        "--attention_sentences=1",
        "--test_beam_size=0",
        "--progress_bar=false",
    ]
    # The first run validates without BLEU: the resumed one searches (and draws attention).
    first = _train(command + ["--max_steps=6", "--valid_beam_size=0"], fork_server)
    resumed = _train(command + ["--max_steps=10"], fork_server)
    return PoseNetRun(data_dir, model_dir, first, resumed)


def _translate(run, *flags, model_dir=None):
    return _run(
        [
            "pipelines.translate",
            f"--data_dir={run.data_dir}",
            f"--model_dir={model_dir or run.model_dir}",
            *SEARCH,
            *flags,
        ],
        stdin="\n".join(SENTENCES[:2]) + "\n",
    ).splitlines()


@pytest.mark.slow  # after a PoseNet run trained in two processes
def test_trains_under_mirrored_strategy_resumes_and_writes_attention_images(posenet_run):
    with open(f"{posenet_run.model_dir}/config.json") as f:
        model = json.load(f)["model"]
    assert model["family"] == "posenet" and model["hidden_dim"] == 32
    assert "step 6" in posenet_run.first
    assert re.search(r"Resumed from .*ckpt-6: step 6", posenet_run.resumed)
    assert "step 10" in posenet_run.resumed
    accumulator = event_accumulator.EventAccumulator(
        f"{posenet_run.model_dir}/valid", size_guidance={event_accumulator.TENSORS: 0}
    )
    accumulator.Reload()
    tags = set(accumulator.Tags()["tensors"])
    # One heatmap per decoder layer's cross-attention.
    assert {"attention/sentence_0/layer_0", "attention/sentence_0/layer_1"} <= tags, tags


@pytest.mark.slow  # after a PoseNet run trained in two processes
def test_averaging_ensembles_shortlists_and_bfloat16(posenet_run, tmp_path):
    averaged = str(tmp_path / "averaged")
    _run(
        [
            "pipelines.average_checkpoints",
            f"--model_dir={posenet_run.model_dir}",
            "--last=2",
            f"--output_dir={averaged}",
        ]
    )
    _run(
        [
            "pipelines.build_shortlist",
            f"--data_dir={posenet_run.data_dir}",
            f"--model_dir={posenet_run.model_dir}",
        ]
    )
    scores = json.loads(
        _run(
            [
                "pipelines.evaluate",
                f"--data_dir={posenet_run.data_dir}",
                f"--model_dir={posenet_run.model_dir},{averaged}",
                *SEARCH,
                "--shortlist",
                "--inference_dtype=bfloat16",
                "--json",
            ]
        ).splitlines()[-1]
    )
    assert scores["sentences"] == SPLIT_PAIRS and np.isfinite(scores["bleu"]) and scores["chrf"] > 0
    translations = _translate(posenet_run, model_dir=averaged)
    assert len(translations) == 2 and all(translations)


@pytest.mark.slow  # after a PoseNet run trained in two processes
def test_approx_bleu_is_reported_for_one_run_and_refused_for_an_ensemble(posenet_run):
    command = [
        "pipelines.evaluate",
        f"--data_dir={posenet_run.data_dir}",
        f"--model_dir={posenet_run.model_dir}",
        "--split=validation",
        "--beam_size=1",
        "--approx_bleu",
        "--json",
    ]
    scores = json.loads(_run(command).splitlines()[-1])
    assert 0 <= scores["approx_bleu_unpadded"] <= 100 and 0 < scores["approx_bleu"] <= 100
    assert scores["approx_bleu_batches"] >= 1
    ensemble = [f"--model_dir={posenet_run.model_dir},{posenet_run.model_dir}"]
    result = run_in_process(command + ensemble, check=False)
    assert result.returncode != 0 and "--approx_bleu scores one --model_dir" in result.stderr


@pytest.mark.slow  # after a PoseNet run trained in two processes
def test_both_exports_serve_what_the_checkpoint_translates(posenet_run, tmp_path, fork_server):
    """Version 1 is the default export (small batches searched by XLA buckets), version
    2 the graph-mode one (`--noxla_small_batches`), served over gRPC."""
    expected = _translate(posenet_run)
    export_dir = tmp_path / "posenet"
    for flags in ([], ["--noxla_small_batches"]):
        _run(
            [
                "pipelines.export",
                f"--data_dir={posenet_run.data_dir}",
                f"--model_dir={posenet_run.model_dir}",
                f"--export_dir={export_dir}",
                *SEARCH,
                *flags,
            ]
        )
    for version in ("1", "2"):
        ops = json.loads(
            run_python(
                ["-m", "tests.helpers.saved_model_checks", "ops", str(export_dir / version)],
                fork_server=fork_server,
            ).stdout
        )
        assert ops["other"] == [], ops["other"]  # core TF and tf-text ops only
    import tensorflow_text  # noqa: F401 (its ops, before loading an export)

    compiled = tf.saved_model.load(str(export_dir / "1")).signatures["serving_default"]
    translations = compiled(text=tf.constant(SENTENCES[:2]))["translation"].numpy()
    assert [text.decode() for text in translations] == expected

    server, address = start_server(export_dir, "posenet", fork_server=fork_server)
    try:
        with grpc.insecure_channel(address) as channel:
            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            outputs = predict(stub, "posenet", SENTENCES)
    finally:
        stop_server(server)
    served = [text.decode() for text in outputs["translation"]]
    assert served[:2] == expected and np.all(np.isfinite(outputs["score"]))


@pytest.mark.slow  # after a PoseNet run trained in two processes
def test_fairseq_export_refuses_a_posenet_run_in_one_line(posenet_run, tmp_path):
    result = run_in_process(
        [
            "pipelines.export_fairseq",
            f"--model_dir={posenet_run.model_dir}",
            f"--output_dir={tmp_path / 'fairseq'}",
        ],
        check=False,
    )
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1] == (
        "export_fairseq: error: fairseq's fconv holds ConvS2S models only: a PoseNet run "
        "cannot be exported to fairseq."
    )
