"""Import of fairseq `fconv` checkpoints, checked against fairseq itself.

Random fairseq models of three specs are saved in fairseq's checkpoint format, converted
and compared with fairseq: log-probabilities on left-padded batches, beam search
against `SequenceGenerator`, and incremental decoding step by step (with a beam
reordering). Then the refusals, and the pipelines end to end: import, pre-tokenised
translation, ids-only export, evaluation of the export, and SentencePiece text.

The parity checks run in the fast tier, the pipelines end to end in the slow one. Needs
the `parity` extra (torch==2.13.0, then fairseq-fixed). Without it the module is
skipped, except under CI (CI=true), where a missing fairseq is an error.
"""

import argparse
import io
import json
import os

import numpy as np
import pytest
from helpers.parity import require_fairseq

require_fairseq()

import tensorflow as tf  # noqa: E402
import torch  # noqa: E402
from fairseq.sequence_generator import SequenceGenerator  # noqa: E402
from helpers import fairseq_models  # noqa: E402
from helpers.in_process import run_in_process  # noqa: E402

from convs2s_tf.decoding import SearchConfig, beam_search  # noqa: E402
from convs2s_tf.interop import fairseq_fconv  # noqa: E402
from convs2s_tf.interop.fairseq_fconv import FairseqImportError  # noqa: E402
from convs2s_tf.vocabulary import EOS_ID, PAD_ID  # noqa: E402

SOURCE_TOKENS = [f"s{i}" for i in range(40)]
TARGET_TOKENS = [f"t{i}" for i in range(50)]
# name: (fairseq model arguments, checkpoint style, beam length penalty)
SPECS = {
    # The authors' IWSLT'14 De-En architecture as fairseq defines it.
    "fconv_iwslt_de_en": (
        dict(
            arch="fconv_iwslt_de_en",
            dropout=0.2,
            max_source_positions=64,
            max_target_positions=64,
        ),
        "args",
        1.0,
    ),
    # Projections between widths, residual distances 2 and 0, even kernel widths
    # (asymmetric "same" padding), attention on blocks 0 and 2 only, f_out != f.
    "projections_partial_attention": (
        dict(
            arch="fconv",
            encoder_embed_dim=20,
            decoder_embed_dim=20,
            encoder_layers="[(16, 3)] + [(32, 2)] * 2 + [(24, 4, 2)] + [(24, 1, 0)]",
            decoder_layers="[(16, 3)] + [(32, 3, 2)] + [(24, 2)] + [(24, 4, 0)]",
            decoder_attention="[True, False, True, False]",
            decoder_out_embed_dim=12,
            dropout=0.3,
            max_source_positions=40,
            max_target_positions=50,
        ),
        "cfg",
        0.6,
    ),
    # Output projection tied to the decoder's token table, wide decoder kernels.
    "shared_output_embedding": (
        dict(
            arch="fconv_wmt_en_ro",
            encoder_embed_dim=24,
            decoder_embed_dim=24,
            encoder_layers="[(24, 3)] * 2",
            decoder_layers="[(32, 5)] * 2",
            decoder_out_embed_dim=24,
            share_input_output_embed=True,
            dropout=0.0,
            max_source_positions=30,
            max_target_positions=30,
        ),
        "args",
        1.3,
    ),
}
BEAM_SENTENCES = 20
MAX_LEN_B = 10


@pytest.fixture(scope="module")
def dictionaries(tmp_path_factory):
    root = tmp_path_factory.mktemp("fairseq_dicts")
    source = fairseq_models.make_dictionary(SOURCE_TOKENS, root / "dict.src.txt")
    target = fairseq_models.make_dictionary(TARGET_TOKENS, root / "dict.tgt.txt")
    return {
        "source": source,
        "target": target,
        "source_path": str(root / "dict.src.txt"),
        "target_path": str(root / "dict.tgt.txt"),
    }


@pytest.fixture(scope="module", params=sorted(SPECS))
def converted(request, dictionaries, tmp_path_factory):
    """(spec name, fairseq model, converted ConvS2S) for each spec."""
    arguments, style, _ = SPECS[request.param]
    model, args = fairseq_models.build_model(
        arguments, dictionaries["source"], dictionaries["target"], seed=7
    )
    path = tmp_path_factory.mktemp("fairseq_checkpoints") / f"{request.param}.pt"
    fairseq_models.save_checkpoint(model, args, path, style=style)
    ours, config, architecture, _ = fairseq_fconv.load_fairseq_model(
        str(path), dictionaries["source_path"], dictionaries["target_path"]
    )
    assert architecture == arguments["arch"]
    assert config["dropout"] == pytest.approx(args.dropout)
    return request.param, model, ours


def left_padded_sources(count, width, vocab_size, seed):
    """`[count, width]` sources ending in `</s>`, left-padded as fairseq batches them."""
    rng = np.random.default_rng(seed)
    sources = np.full([count, width], PAD_ID, np.int64)
    for row in range(count):
        length = int(rng.integers(2, width + 1)) if row else width
        sources[row, width - length :] = list(rng.integers(4, vocab_size, length - 1)) + [EOS_ID]
    return sources


def fairseq_log_probs(model, sources, targets):
    with torch.no_grad():
        lengths = torch.tensor((sources != PAD_ID).sum(1))
        output = model(torch.tensor(sources), lengths, torch.tensor(targets))
        return model.get_normalized_probs(output, log_probs=True).numpy()


def test_log_probabilities_match_fairseq(converted):
    name, fairseq_model, model = converted
    sources = left_padded_sources(8, 11, len(SOURCE_TOKENS) + 4, seed=1)
    rng = np.random.default_rng(2)
    targets = np.full([8, 9], PAD_ID, np.int64)  # decoder inputs, right-padded
    for row in range(8):
        length = int(rng.integers(1, 10)) if row else 9
        targets[row, :length] = [EOS_ID] + list(rng.integers(4, len(TARGET_TOKENS) + 4, length - 1))
    expected = fairseq_log_probs(fairseq_model, sources, targets)
    logits = model(
        {"source": tf.constant(sources, tf.int32), "target_input": tf.constant(targets, tf.int32)}
    )
    ours = tf.nn.log_softmax(logits).numpy()
    real = targets != PAD_ID
    difference = np.abs(ours - expected)[real].max()
    print(f"{name}: max |log p - log p_fairseq| = {difference:.2e}")
    assert difference < 1e-4


def test_beam_search_matches_fairseq_generator(converted, dictionaries):
    name, fairseq_model, model = converted
    length_penalty = SPECS[name][2]
    sources = left_padded_sources(BEAM_SENTENCES, 10, len(SOURCE_TOKENS) + 4, seed=3)
    generator = SequenceGenerator(
        [fairseq_model],
        dictionaries["target"],
        beam_size=5,
        max_len_a=0,
        max_len_b=MAX_LEN_B,
        len_penalty=length_penalty,
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
    search = tf.function(
        lambda source: beam_search(
            model,
            source,
            SearchConfig(
                beam_size=5,
                nbest=5,
                max_len_a=0.0,
                max_len_b=MAX_LEN_B,
                length_penalty=length_penalty,
            ),
        )
    )
    output = search(tf.constant(sources, tf.int32))
    tokens, lengths, scores = (output.tokens.numpy(), output.lengths.numpy(), output.scores.numpy())
    identical, score_differences = 0, []
    for row in range(BEAM_SENTENCES):
        ours = [tokens[row, i, : lengths[row, i]].tolist() for i in range(5)]
        theirs = [hypothesis["tokens"].tolist() for hypothesis in expected[row]]
        if ours == theirs:
            identical += 1
            theirs_scores = [float(hypothesis["score"]) for hypothesis in expected[row]]
            score_differences.append(np.abs(scores[row] - theirs_scores).max())
    print(
        f"{name}: {identical}/{BEAM_SENTENCES} identical 5-best lists, max score difference "
        f"{max(score_differences):.2e}"
    )
    assert identical >= 0.99 * BEAM_SENTENCES
    assert max(score_differences) < 1e-3


def test_incremental_decoding_matches_fairseq_step_by_step(converted):
    name, fairseq_model, model = converted
    sources = left_padded_sources(4, 9, len(SOURCE_TOKENS) + 4, seed=4)
    rng = np.random.default_rng(5)
    steps = 8
    forced = np.concatenate(
        [np.full([4, 1], EOS_ID), rng.integers(4, len(TARGET_TOKENS) + 4, [4, steps - 1])], 1
    )
    # Midway, hypotheses are reordered as beam search does (one repeated, one dropped).
    reorder_at, order = 4, np.array([2, 0, 0, 3])
    decoder = fairseq_model.decoder
    with torch.no_grad():
        encoder_out = fairseq_model.encoder(
            torch.tensor(sources), torch.tensor((sources != PAD_ID).sum(1))
        )
    encoder_output = model.encode(tf.constant(sources, tf.int32))
    state = model.decoder.initial_state(4)
    incremental_state, history = {}, forced[:, :1]
    differences = []
    for step in range(steps):
        if step == reorder_at:
            with torch.no_grad():
                decoder.reorder_incremental_state_scripting(incremental_state, torch.tensor(order))
                encoder_out = fairseq_model.encoder.reorder_encoder_out(
                    encoder_out, torch.tensor(order)
                )
            state = tf.nest.map_structure(lambda window: tf.gather(window, order), state)
            encoder_output = tf.nest.map_structure(lambda t: tf.gather(t, order), encoder_output)
            history = history[order]
        with torch.no_grad():
            output = decoder(
                torch.tensor(history), encoder_out, incremental_state=incremental_state
            )
            expected = fairseq_model.get_normalized_probs(output, log_probs=True)[:, -1].numpy()
        logits, _, state = model.decoder.step(
            tf.constant(history[:, -1], tf.int32), step, state, encoder_output
        )
        differences.append(np.abs(tf.nn.log_softmax(logits).numpy() - expected).max())
        if step + 1 < steps:
            history = np.concatenate([history, forced[:, step + 1 : step + 2]], 1)
    print(f"{name}: per-step max |log p difference| {max(differences):.2e}")
    assert max(differences) < 1e-4


@pytest.mark.parametrize("architecture", fairseq_fconv.FCONV_ARCHITECTURES)
def test_presets_fill_in_what_fairseqs_architectures_do(architecture):
    from fairseq.models import ARCH_CONFIG_REGISTRY

    from convs2s_tf.models import parse_attention_spec, parse_layer_spec

    def canonical(settings):
        settings = dict(settings)
        for key in ("encoder_layers", "decoder_layers"):
            settings[key] = parse_layer_spec(settings[key])
        settings["decoder_attention"] = parse_attention_spec(
            settings["decoder_attention"], len(settings["decoder_layers"])
        )
        return settings

    defaults = argparse.Namespace()
    ARCH_CONFIG_REGISTRY[architecture](defaults)
    ours = fairseq_fconv.fconv_settings(architecture, {})
    assert canonical(ours) == canonical({key: getattr(defaults, key) for key in ours})


# ---------------------------------------------------------------- layouts and refusals


def _small_model(dictionaries, seed=11):
    arguments = dict(SPECS["projections_partial_attention"][0])
    return fairseq_models.build_model(
        arguments, dictionaries["source"], dictionaries["target"], seed=seed
    )


def _converted_log_probs_difference(fairseq_model, args, dictionaries, path):
    fairseq_models.save_checkpoint(fairseq_model, args, path)
    model, *_ = fairseq_fconv.load_fairseq_model(
        str(path), dictionaries["source_path"], dictionaries["target_path"]
    )
    sources = left_padded_sources(4, 7, len(SOURCE_TOKENS) + 4, seed=6)
    targets = np.array([[EOS_ID, 5, 6, 7]] * 4)
    expected = fairseq_log_probs(fairseq_model, sources, targets)
    logits = model(
        {"source": tf.constant(sources, tf.int32), "target_input": tf.constant(targets, tf.int32)}
    )
    return np.abs(tf.nn.log_softmax(logits).numpy() - expected).max()


def test_first_version_decoders_and_removed_weight_norm_convert_exactly(dictionaries, tmp_path):
    # fairseq's version-1 decoders normalise convolution weights per kernel tap (dim=0).
    model, args = _small_model(dictionaries)
    generator = torch.Generator().manual_seed(3)
    for index, convolution in enumerate(model.decoder.convolutions):
        torch.nn.utils.remove_weight_norm(convolution)
        model.decoder.convolutions[index] = torch.nn.utils.weight_norm(convolution, dim=0)
        with torch.no_grad():
            convolution.weight_g.mul_(
                0.5 + torch.rand(convolution.weight_g.shape, generator=generator)
            )
    model.decoder.version.fill_(1)
    assert tuple(model.state_dict()["decoder.convolutions.0.weight_g"].shape) == (3, 1, 1)
    assert _converted_log_probs_difference(model, args, dictionaries, tmp_path / "v1.pt") < 1e-4
    # A model saved after fairseq's make_generation_fast_ holds plain weights.
    model, args = _small_model(dictionaries, seed=12)
    model.make_generation_fast_()
    assert "decoder.fc3.weight" in model.state_dict()
    assert _converted_log_probs_difference(model, args, dictionaries, tmp_path / "fast.pt") < 1e-4


class Unsafe:
    """Stands for any pickled object a checkpoint could smuggle in."""


def test_refuses_pickled_objects_other_architectures_and_mismatches(dictionaries, tmp_path):
    model, args = _small_model(dictionaries)
    state = {"args": args, "model": model.state_dict()}
    paths = {}
    for name, extra in (
        ("pickled", {"extra_state": {"hook": Unsafe()}}),
        ("transformer", {"args": argparse.Namespace(**{**vars(args), "arch": "transformer"})}),
        ("self_att", {"args": argparse.Namespace(**{**vars(args), "arch": "fconv_self_att"})}),
        ("no_args", {"args": None}),
    ):
        paths[name] = tmp_path / f"{name}.pt"
        torch.save({**state, **extra}, str(paths[name]))
    torch.save(torch.zeros(3), str(tmp_path / "tensor.pt"))
    (tmp_path / "text.pt").write_text("not a checkpoint")
    load = fairseq_fconv.load_fairseq_model
    dicts = (dictionaries["source_path"], dictionaries["target_path"])

    with pytest.raises(FairseqImportError, match=r"pickled Python objects.*Unsafe.*weights_only"):
        load(str(paths["pickled"]), *dicts)
    with pytest.raises(FairseqImportError, match=r"architecture 'transformer'"):
        load(str(paths["transformer"]), *dicts)
    with pytest.raises(FairseqImportError, match=r"architecture 'fconv_self_att'"):
        load(str(paths["self_att"]), *dicts)
    with pytest.raises(FairseqImportError, match=r"no model arguments"):
        load(str(paths["no_args"]), *dicts)
    with pytest.raises(FairseqImportError, match=r"not a fairseq checkpoint"):
        load(str(tmp_path / "tensor.pt"), *dicts)
    with pytest.raises(FairseqImportError, match=r"not a readable PyTorch checkpoint"):
        load(str(tmp_path / "text.pt"), *dicts)
    with pytest.raises(FileNotFoundError, match=r"missing\.pt does not exist"):
        load(str(tmp_path / "missing.pt"), *dicts)
    good = tmp_path / "good.pt"
    fairseq_models.save_checkpoint(model, args, good)
    # The dictionaries swapped: 50 + 4 target symbols for the 44-row source table.
    with pytest.raises(FairseqImportError, match=r"source dictionary has 54 symbols .* 44 rows"):
        load(str(good), *dicts[::-1])
    run = tmp_path / "run"
    fairseq_fconv.convert_checkpoint(str(good), *dicts, str(run))
    with pytest.raises(FairseqImportError, match=r"already holds a run"):
        fairseq_fconv.convert_checkpoint(str(good), *dicts, str(run))


# ----------------------------------------------------------------- pipelines end to end


def _run(arguments, stdin=None):
    return run_in_process(arguments, stdin)


def _main(module_name, *arguments):
    """Runs a pipeline in process; returns its standard output."""
    return _run([module_name, *arguments]).stdout


def _fairseq_translations(fairseq_model, dictionary_pairs, lines, max_len_b):
    """fairseq-interactive's output for pre-tokenised `lines`: beam 5, best hypothesis."""
    source_dictionary, target_dictionary = dictionary_pairs
    encoded = [
        [source_dictionary.index(token) for token in line.split()] + [EOS_ID] for line in lines
    ]
    width = max(len(row) for row in encoded)
    sources = np.full([len(lines), width], PAD_ID, np.int64)
    for row, ids in enumerate(encoded):
        sources[row, width - len(ids) :] = ids
    generator = SequenceGenerator(
        [fairseq_model], target_dictionary, beam_size=5, max_len_a=0, max_len_b=max_len_b
    )
    with torch.no_grad():
        hypotheses = generator.forward(
            {
                "net_input": {
                    "src_tokens": torch.tensor(sources),
                    "src_lengths": torch.tensor((sources != PAD_ID).sum(1)),
                }
            }
        )
    return [target_dictionary.string(h[0]["tokens"]) for h in hypotheses]


@pytest.mark.slow  # five pipelines end to end, an export among them
def test_import_translate_export_evaluate_pipelines(dictionaries, tmp_path):
    model, args = _small_model(dictionaries, seed=13)
    checkpoint = fairseq_models.save_checkpoint(model, args, tmp_path / "checkpoint_best.pt")
    run = tmp_path / "converted"
    imported = _run(
        [
            "pipelines.import_fairseq",
            f"--checkpoint={checkpoint}",
            f"--source_dict={dictionaries['source_path']}",
            f"--target_dict={dictionaries['target_path']}",
            f"--output_dir={run}",
        ]
    )
    assert "fconv" in imported.stdout and str(run) in imported.stdout
    config = json.loads((run / "config.json").read_text())
    assert config["vocabulary"]["format"] == "fairseq_dictionary"
    assert config["fairseq"]["architecture"] == "fconv"
    assert (run / "source_dict.txt").read_text() == open(dictionaries["source_path"]).read()

    lines = ["s4 s5 s6 s7", "s10 never-seen s11", "", "s30 s31 s32 s33 s34 s35 s36"]
    search = ["--beam_size=5", "--max_len_a=0", "--max_len_b=8"]
    (tmp_path / "source.txt").write_text("\n".join(lines) + "\n")
    output = tmp_path / "translations.txt"
    _main(
        "pipelines.translate",
        f"--model_dir={run}",
        f"--input={tmp_path / 'source.txt'}",
        f"--output={output}",
        *search,
    )
    expected = _fairseq_translations(
        model, (dictionaries["source"], dictionaries["target"]), lines, max_len_b=8
    )
    assert output.read_text().splitlines() == expected
    assert all(token in TARGET_TOKENS for line in expected for token in line.split())

    export_dir = tmp_path / "exported"
    _main("pipelines.export", f"--model_dir={run}", f"--export_dir={export_dir}", *search)
    extra = sorted(os.listdir(export_dir / "1" / "assets.extra"))
    assert extra == ["source_dict.txt", "target_dict.txt", "tf_serving_warmup_requests"]
    assert sorted(tf.saved_model.load(str(export_dir / "1")).signatures) == ["translate_ids"]
    (tmp_path / "reference.txt").write_text("\n".join(expected) + "\n")
    printed = _main(
        "pipelines.evaluate",
        f"--saved_model={export_dir}",
        f"--source={tmp_path / 'source.txt'}",
        f"--reference={tmp_path / 'reference.txt'}",
        "--json",
    )
    scores = json.loads(printed.strip().splitlines()[-1])
    assert scores["bleu"] == pytest.approx(100.0) and scores["sentences"] == len(lines)
    _check_shortlist_of_imported_run(run, dictionaries, export_dir, tmp_path, search)


def _check_shortlist_of_imported_run(run, dictionaries, export_dir, tmp_path, search):
    """A shortlist built from the imported run's dictionaries and a user's text, used by
    translate and carried by the token-ids export."""
    from convs2s_tf.shortlist import build_shortlist, shortlist_path

    (tmp_path / "train.src").write_text("s4 s5 s6\ns10 s11\ns30 s31 s32\n" * 3)
    (tmp_path / "train.tgt").write_text("t4 t5 t6\nt10 t11\nt30 t31 t32\n" * 3)
    shortlist = build_shortlist(
        str(run), k=2, n=3, source_file=tmp_path / "train.src", target_file=tmp_path / "train.tgt"
    )
    shortlist.save(shortlist_path(str(run)))
    source = tmp_path / "source.txt"
    output = tmp_path / "shortlisted.txt"
    _main(
        "pipelines.translate",
        f"--model_dir={run}",
        f"--input={source}",
        f"--output={output}",
        "--shortlist",
        *search,
    )
    source_ids = [dictionaries["source"].index(t) for t in source.read_text().split()]
    allowed = {TARGET_TOKENS[i - 4] for i in shortlist.candidate_ids(source_ids) if i >= 4}
    allowed.add("<unk>")  # a special id, always a candidate
    translations = output.read_text().splitlines()
    assert {token for line in translations for token in line.split()} <= allowed
    _main(
        "pipelines.export",
        f"--model_dir={run}",
        f"--export_dir={export_dir}",
        "--shortlist",
        *search,
    )
    served = tmp_path / "served.txt"
    _main(
        "pipelines.evaluate",
        f"--saved_model={export_dir / '2'}",
        f"--source={source}",
        f"--reference={output}",
        f"--output={served}",
    )
    assert served.read_text().splitlines() == translations


def _sentencepiece_model(lines):
    import sentencepiece as spm

    model = io.BytesIO()
    # SentencePiece's own default ids (<unk>=0, <s>=1, </s>=2), as fairseq users train it.
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        vocab_size=120,
        model_type="bpe",
        num_threads=1,
        minloglevel=2,
    )
    return model.getvalue()


@pytest.mark.slow  # pipelines end to end
def test_sentencepiece_text_in_and_out(tmp_path):
    import sentencepiece as spm
    from conftest import multi30k_lines

    from convs2s_tf.inference import CheckpointTranslator
    from convs2s_tf.interop import tokenizer_for_run
    from convs2s_tf.runs import load_trained_model

    proto = _sentencepiece_model(multi30k_lines("train", "en", 300))
    (tmp_path / "spm.model").write_bytes(proto)
    processor = spm.SentencePieceProcessor(model_proto=proto)
    pieces = [processor.id_to_piece(i) for i in range(3, processor.get_piece_size())]
    # A joined dictionary in "frequency" order, leaving out a few pieces (they become <unk>).
    tokens = [pieces[i] for i in np.random.default_rng(0).permutation(len(pieces))[:-5]]
    dictionary = fairseq_models.make_dictionary(tokens, tmp_path / "dict.txt")
    arguments = dict(SPECS["shared_output_embedding"][0])
    fairseq_model, args = fairseq_models.build_model(arguments, dictionary, dictionary, seed=5)
    checkpoint = fairseq_models.save_checkpoint(fairseq_model, args, tmp_path / "model.pt")
    run = tmp_path / "run"
    fairseq_fconv.convert_checkpoint(
        str(checkpoint),
        str(tmp_path / "dict.txt"),
        str(tmp_path / "dict.txt"),
        str(run),
        sentencepiece_model=str(tmp_path / "spm.model"),
    )
    texts = ["A man is riding a bicycle.", "Two dogs play in the snow.", ""]
    model, tokenizer, _, _ = load_trained_model(str(run), tokenizer_factory=tokenizer_for_run)
    assert not tokenizer.pretokenized
    translator = CheckpointTranslator(
        model, tokenizer, SearchConfig(beam_size=5, max_len_a=0.0, max_len_b=8)
    )
    ours = [hypotheses[0][0] for hypotheses in translator.translate(texts)]
    # fairseq's way: spm_encode to pieces, dictionary ids, generate, then spm decode.
    piece_lines = [" ".join(processor.encode(text, out_type=str)) for text in texts]
    expected = _fairseq_translations(fairseq_model, (dictionary, dictionary), piece_lines, 8)
    assert ours == [processor.decode_pieces(line.split()) for line in expected]
    assert any(ours)
    # Without the SentencePiece model the same run reads and writes pieces.
    _, pretokenized, _, _ = load_trained_model(
        str(run), sentencepiece_model="", tokenizer_factory=tokenizer_for_run
    )
    assert pretokenized.pretokenized
    pieces_out = CheckpointTranslator(
        model, pretokenized, SearchConfig(beam_size=5, max_len_a=0.0, max_len_b=8)
    ).translate(piece_lines)
    assert [hypotheses[0][0] for hypotheses in pieces_out] == expected
    # A run imported without it takes --sentencepiece_model on the command line.
    plain_run = tmp_path / "plain_run"
    fairseq_fconv.convert_checkpoint(
        str(checkpoint), str(tmp_path / "dict.txt"), str(tmp_path / "dict.txt"), str(plain_run)
    )
    (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n")
    _main(
        "pipelines.translate",
        f"--model_dir={plain_run}",
        f"--sentencepiece_model={tmp_path / 'spm.model'}",
        f"--input={tmp_path / 'texts.txt'}",
        f"--output={tmp_path / 'out.txt'}",
        "--beam_size=5",
        "--max_len_a=0",
        "--max_len_b=8",
    )
    assert (tmp_path / "out.txt").read_text().splitlines() == ours
