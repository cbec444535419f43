"""Export of runs as fairseq `fconv` checkpoints, checked against fairseq itself.

Random models of three specs are saved as run directories (with a small SentencePiece
model, whose pieces become the dictionaries), exported, and then: imported back (the
same weights, bit for bit), loaded by fairseq's own `load_model_ensemble_and_task` (its
log-probabilities equal ours), searched with fairseq's `SequenceGenerator` (the same
5-best lists as ours), and run through `pipelines.export_fairseq` and `fairseq-generate`
end to end. A fairseq model imported and exported again is its own checkpoint, tensor for
tensor and dictionary line for line. Then the refusals.

The parity checks run in the fast tier, the pipeline and `fairseq-generate` in the slow
one. Needs the `parity` extra (torch==2.13.0, then fairseq-fixed). Without it the module is
skipped, except under CI (CI=true), where a missing fairseq is an error.
"""

import os

import numpy as np
import pytest
from helpers.parity import require_fairseq

require_fairseq()

import tensorflow as tf  # noqa: E402
import torch  # noqa: E402
from conftest import multi30k_lines, run_python  # noqa: E402
from fairseq import checkpoint_utils  # noqa: E402
from fairseq.sequence_generator import SequenceGenerator  # noqa: E402
from helpers.in_process import run_in_process  # noqa: E402
from helpers.models import randomize_weights, small_model_config  # noqa: E402

from convs2s_tf.data.bpe import train_bpe  # noqa: E402
from convs2s_tf.decoding import SearchConfig, beam_search  # noqa: E402
from convs2s_tf.interop import fairseq_fconv  # noqa: E402
from convs2s_tf.interop.fairseq_export import FairseqExportError, export_run  # noqa: E402
from convs2s_tf.models import ConvS2S  # noqa: E402
from convs2s_tf.runs import RunDirectory, load_trained_model  # noqa: E402
from convs2s_tf.vocabulary import EOS_ID, PAD_ID  # noqa: E402

VOCAB_SIZE = 120
SPECS = {
    # The fconv_iwslt_de_en shape, smaller: every block with attention.
    "uniform": small_model_config(VOCAB_SIZE, width=16, blocks=2, max_positions=40),
    # Residual projections between widths, residual distances 2 and 0, kernel widths 1 to
    # 5 (even ones padded asymmetrically), attention in two of four blocks, f_out != f.
    "projections_partial_attention": dict(
        source_vocab_size=VOCAB_SIZE,
        target_vocab_size=VOCAB_SIZE,
        embed_dim=12,
        encoder_layers="[(16, 3)] + [(24, 2)] * 2 + [(24, 4, 2)] + [(24, 1, 0)]",
        decoder_layers="[(16, 3)] + [(24, 3, 2)] + [(20, 2)] + [(20, 5, 0)]",
        decoder_attention="[True, False, True, False]",
        decoder_out_embed_dim=10,
        dropout=0.2,
        max_source_positions=40,
        max_target_positions=48,
    ),
    # A distilled student's shape (the multi30k_student_* presets): a deeper encoder, one
    # decoder block half as wide with 5 taps, the output tied to the token table.
    "student": dict(
        small_model_config(VOCAB_SIZE, width=16, blocks=4, max_positions=40),
        decoder_layers="[(8, 5)]",
        share_decoder_input_output_embed=True,
    ),
    # Output projection tied to the decoder's token table.
    "shared_output_embedding": small_model_config(
        VOCAB_SIZE, width=16, blocks=2, max_positions=40, share_decoder_input_output_embed=True
    ),
}
SENTENCES = 20
MAX_LEN_B = 10


@pytest.fixture(scope="module")
def sentencepiece_model(tmp_path_factory):
    """A BPE model with the project's special ids, as pipelines.prepare_data trains one."""
    root = tmp_path_factory.mktemp("sentencepiece")
    text = root / "train.txt"
    lines = multi30k_lines("train", "en", 200) + multi30k_lines("train", "de", 200)
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    model_path, _ = train_bpe([str(text)], str(root / "spm"), VOCAB_SIZE, num_threads=1)
    return model_path


def write_run(path, config, sentencepiece_model, seed=0):
    """A run directory holding a random `ConvS2S` of `config`; returns the model.

    Small biases leave the output to depend on the input (varied hypotheses) and larger
    gains before the output projection peak its distributions (beam search meets no
    near-ties)."""
    model = ConvS2S(**config)
    model(model.dummy_inputs())
    randomize_weights(model, seed=seed)
    for variable in model.trainable_weights:
        if variable.path.endswith("bias"):
            variable.assign(variable * 0.1)
    gains = model.decoder.hidden_projection.kernel_g
    gains.assign(gains * 4.0)
    run = RunDirectory(path)
    run.write_config({"model": config, "sentencepiece_model": sentencepiece_model})
    run.save_best(tf.train.Checkpoint(model=model))
    return model


@pytest.fixture(scope="module", params=sorted(SPECS))
def exported(request, sentencepiece_model, tmp_path_factory):
    """(spec name, our model, the export's ExportResult) for each spec."""
    root = tmp_path_factory.mktemp(request.param)
    model = write_run(root / "run", SPECS[request.param], sentencepiece_model, seed=3)
    result = export_run(str(root / "run"), str(root / "fairseq"))
    return request.param, model, result


def left_padded_sources(count, width, seed):
    """`[count, width]` sources ending in `</s>`, left-padded as fairseq batches them."""
    rng = np.random.default_rng(seed)
    sources = np.full([count, width], PAD_ID, np.int64)
    for row in range(count):
        length = int(rng.integers(2, width + 1)) if row else width
        sources[row, width - length :] = list(rng.integers(4, VOCAB_SIZE, length - 1)) + [EOS_ID]
    return sources


def fairseq_model(result):
    """The export loaded as fairseq-generate loads a model (task and dictionaries from
    the checkpoint's config)."""
    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([result.checkpoint_path])
    assert cfg.task.source_lang == result.source_lang
    return models[0].eval(), task


def variable_names(weights):
    """The variables' paths without the model's own (unique) name."""
    return [variable.path.split("/", 1)[1] for variable in weights]


def test_export_then_import_gives_identical_weights(exported, tmp_path):
    name, model, result = exported
    run = tmp_path / "imported"
    dictionaries = [
        os.path.join(result.output_dir, f"dict.{lang}.txt")
        for lang in (result.source_lang, result.target_lang)
    ]
    fairseq_fconv.convert_checkpoint(result.checkpoint_path, *dictionaries, str(run))
    imported, *_ = load_trained_model(
        str(run), sentencepiece_model="", tokenizer_factory=lambda *args: None
    )
    original = model.get_config()
    for key, value in imported.get_config().items():
        if key in SPECS[name]:
            assert value == original[key], key
    assert variable_names(imported.weights) == variable_names(model.weights)
    for ours, theirs in zip(model.weights, imported.weights):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy(), err_msg=ours.path)


def test_fairseq_log_probabilities_equal_ours(exported):
    name, model, result = exported
    fairseq, task = fairseq_model(result)
    assert len(task.source_dictionary) == len(task.target_dictionary) == VOCAB_SIZE
    sources = left_padded_sources(8, 11, seed=1)
    rng = np.random.default_rng(2)
    targets = np.full([8, 9], PAD_ID, np.int64)  # decoder inputs, right-padded
    for row in range(8):
        length = int(rng.integers(1, 10)) if row else 9
        targets[row, :length] = [EOS_ID] + list(rng.integers(4, VOCAB_SIZE, length - 1))
    with torch.no_grad():
        output = fairseq(
            torch.tensor(sources), torch.tensor((sources != PAD_ID).sum(1)), torch.tensor(targets)
        )
        expected = fairseq.get_normalized_probs(output, log_probs=True).numpy()
    logits = model(
        {"source": tf.constant(sources, tf.int32), "target_input": tf.constant(targets, tf.int32)}
    )
    difference = np.abs(tf.nn.log_softmax(logits).numpy() - expected)[targets != PAD_ID].max()
    print(f"{name}: max |log p - log p_fairseq| = {difference:.2e}")
    assert difference < 1e-4


def our_beam_search(model, sources, nbest=5):
    output = beam_search(
        model,
        tf.constant(sources, tf.int32),
        SearchConfig(beam_size=5, nbest=nbest, max_len_a=0.0, max_len_b=MAX_LEN_B),
    )
    tokens, lengths = output.tokens.numpy(), output.lengths.numpy()
    return [
        [tokens[row, i, : lengths[row, i]].tolist() for i in range(nbest)]
        for row in range(len(sources))
    ], output.scores.numpy()


def test_fairseq_beam_search_equals_ours(exported):
    name, model, result = exported
    fairseq, task = fairseq_model(result)
    sources = left_padded_sources(SENTENCES, 10, seed=3)
    generator = SequenceGenerator(
        [fairseq], task.target_dictionary, beam_size=5, max_len_a=0, max_len_b=MAX_LEN_B
    )
    with torch.no_grad():
        expected = generator.forward(
            {
                "net_input": {
                    "src_tokens": torch.tensor(sources),
                    "src_lengths": torch.tensor((sources != PAD_ID).sum(1)),
                }
            }
        )
    ours, scores = our_beam_search(model, sources)
    theirs = [[h["tokens"].tolist() for h in hypotheses] for hypotheses in expected]
    identical = sum(a == b for a, b in zip(ours, theirs))
    print(f"{name}: {identical}/{SENTENCES} identical 5-best lists")
    assert identical == SENTENCES
    their_scores = np.array([[float(h["score"]) for h in hypotheses] for hypotheses in expected])
    assert np.abs(scores - their_scores).max() < 1e-3


@pytest.mark.slow  # the pipeline, then fairseq-generate in its own process
def test_pipeline_export_and_fairseq_generate(sentencepiece_model, tmp_path):
    """The command-line path: pipelines.export_fairseq, then fairseq-generate (reading
    the pieces as raw text) gives our best hypotheses."""
    run = tmp_path / "run"
    model = write_run(run, SPECS["projections_partial_attention"], sentencepiece_model, seed=5)
    output_dir = tmp_path / "fairseq"
    printed = run_in_process(
        [
            "pipelines.export_fairseq",
            f"--model_dir={run}",
            f"--output_dir={output_dir}",
            "--source_lang=en",
            "--target_lang=de",
        ]
    ).stdout
    assert "fairseq-interactive" in printed and "--bpe=sentencepiece" in printed
    assert sorted(os.listdir(output_dir)) == [
        "checkpoint_best.pt",
        "dict.de.txt",
        "dict.en.txt",
        "sentencepiece.model",
    ]
    symbols = ["<s>", "<pad>", "</s>", "<unk>"] + [
        line.rsplit(" ", 1)[0] for line in (output_dir / "dict.en.txt").read_text().splitlines()
    ]
    sources = left_padded_sources(6, 8, seed=7)
    lines = [" ".join(symbols[i] for i in row if i not in (PAD_ID, EOS_ID)) for row in sources]
    data = tmp_path / "data"
    data.mkdir()
    for lang in ("en", "de"):  # raw text: fairseq reads split.SRC-TGT.LANG with the dicts
        (data / f"test.en-de.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
        (data / f"dict.{lang}.txt").write_text((output_dir / f"dict.{lang}.txt").read_text())
    generated = run_python(
        [
            "-m",
            "fairseq_cli.generate",
            str(data),
            f"--path={output_dir / 'checkpoint_best.pt'}",
            "--dataset-impl=raw",
            "--source-lang=en",
            "--target-lang=de",
            "--beam=5",
            "--max-len-a=0",
            f"--max-len-b={MAX_LEN_B}",
            "--batch-size=4",
            # fairseq's default (8) drops the last, partial batch when it is not a multiple.
            "--required-batch-size-multiple=1",
            "--cpu",
        ]
    ).stdout
    hypotheses = {}
    for line in generated.splitlines():
        if line.startswith("H-"):
            key, _, text = line.split("\t")
            hypotheses[int(key[2:])] = text
    ours, _ = our_beam_search(model, sources, nbest=1)
    expected = [" ".join(symbols[i] for i in best[0][:-1]) for best in ours]
    assert [hypotheses[i] for i in range(len(lines))] == expected


def test_an_imported_fairseq_model_exports_to_its_own_parameters(tmp_path):
    from helpers import fairseq_models

    source = fairseq_models.make_dictionary([f"s{i}" for i in range(30)], tmp_path / "s.txt")
    target = fairseq_models.make_dictionary([f"t{i}" for i in range(35)], tmp_path / "t.txt")
    arguments = dict(
        arch="fconv",
        encoder_embed_dim=12,
        decoder_embed_dim=12,
        encoder_layers="[(16, 3)] + [(24, 2, 0)]",
        decoder_layers="[(16, 3)] + [(24, 3, 2)]",
        decoder_attention="[False, True]",
        decoder_out_embed_dim=10,
        max_source_positions=30,
        max_target_positions=30,
    )
    model, args = fairseq_models.build_model(arguments, source, target, seed=4)
    checkpoint = fairseq_models.save_checkpoint(model, args, tmp_path / "original.pt")
    run = tmp_path / "run"
    fairseq_fconv.convert_checkpoint(
        str(checkpoint), str(tmp_path / "s.txt"), str(tmp_path / "t.txt"), str(run)
    )
    result = export_run(str(run), str(tmp_path / "fairseq"))
    assert (result.source_lang, result.target_lang, result.sentencepiece_model) == (
        "src",
        "tgt",
        None,
    )
    for lang, original in (("src", "s.txt"), ("tgt", "t.txt")):
        exported = tmp_path / "fairseq" / f"dict.{lang}.txt"
        assert exported.read_text() == (tmp_path / original).read_text()
    exported = torch.load(result.checkpoint_path, weights_only=True)["model"]
    assert list(exported) == list(model.state_dict())
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(exported[name], tensor, rtol=0, atol=0, msg=name)


def test_refuses_what_fairseq_cannot_hold(sentencepiece_model, tmp_path):
    config = dict(SPECS["uniform"], source_positions=False)
    write_run(tmp_path / "no_positions", config, sentencepiece_model)
    with pytest.raises(FairseqExportError, match="no source position embeddings"):
        export_run(str(tmp_path / "no_positions"), str(tmp_path / "out1"))
    write_run(tmp_path / "no_vocabulary", SPECS["uniform"], None)
    with pytest.raises(FairseqExportError, match="names no SentencePiece model"):
        export_run(str(tmp_path / "no_vocabulary"), str(tmp_path / "out2"))
    small = dict(SPECS["uniform"], source_vocab_size=50, target_vocab_size=50)
    write_run(tmp_path / "other_vocabulary", small, sentencepiece_model)
    with pytest.raises(FairseqExportError, match="source vocabulary has 120 symbols .* 50 rows"):
        export_run(str(tmp_path / "other_vocabulary"), str(tmp_path / "out3"))
    write_run(tmp_path / "good", SPECS["uniform"], sentencepiece_model)
    export_run(str(tmp_path / "good"), str(tmp_path / "out4"))
    with pytest.raises(FairseqExportError, match="exists already"):
        export_run(str(tmp_path / "good"), str(tmp_path / "out4"))
    with pytest.raises(FairseqExportError, match="one by one"):
        export_run(f"{tmp_path / 'good'},{tmp_path / 'good'}", str(tmp_path / "out5"))
