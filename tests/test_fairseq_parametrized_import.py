"""Import of fairseq `fconv` checkpoints saved with PyTorch's parametrized weight norm.

`torch.nn.utils.parametrizations.weight_norm` (which replaces the deprecated
`torch.nn.utils.weight_norm` that fairseq applies) saves a module's `g` as
`<module>.parametrizations.weight.original0` and `v` as
`<module>.parametrizations.weight.original1`, where fairseq's checkpoints hold
`<module>.weight_g` and `<module>.weight_v`. Random fairseq models are re-parametrized
with it for real, saved, and must convert to exactly the weights (and log-probabilities)
of the same model saved the usual way.

Needs the `parity` extra (torch==2.13.0, then fairseq-fixed). Without it the module is
skipped, except under CI (CI=true), where a missing fairseq is an error.
"""

import numpy as np
import pytest
from helpers.parity import require_fairseq

require_fairseq()

import tensorflow as tf  # noqa: E402
import torch  # noqa: E402
from helpers import fairseq_models  # noqa: E402
from torch.nn.utils import parametrizations  # noqa: E402
from torch.nn.utils.weight_norm import WeightNorm  # noqa: E402

from convs2s_tf.interop import fairseq_fconv  # noqa: E402
from convs2s_tf.interop.fairseq_fconv import FairseqImportError  # noqa: E402
from convs2s_tf.vocabulary import EOS_ID, PAD_ID  # noqa: E402

SOURCE_TOKENS = [f"s{i}" for i in range(30)]
TARGET_TOKENS = [f"t{i}" for i in range(35)]
SPECS = {
    # Residual projections, attention on some blocks, f_out != f: every kind of
    # weight-normalised module (fc1/fc2/fc3, projections, convolutions, attention).
    "projections_partial_attention": dict(
        arch="fconv",
        encoder_embed_dim=20,
        decoder_embed_dim=20,
        encoder_layers="[(16, 3)] + [(32, 2)] * 2 + [(24, 1, 0)]",
        decoder_layers="[(16, 3)] + [(32, 3, 2)] + [(24, 2)]",
        decoder_attention="[True, False, True]",
        decoder_out_embed_dim=12,
        dropout=0.3,
        max_source_positions=40,
        max_target_positions=50,
    ),
    # The output projection is the decoder's (plain, tied) token table.
    "shared_output_embedding": dict(
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
}
PARAMETRIZED_G = "parametrizations.weight.original0"
PARAMETRIZED_V = "parametrizations.weight.original1"


@pytest.fixture(scope="module")
def dictionaries(tmp_path_factory):
    root = tmp_path_factory.mktemp("fairseq_dicts")
    return {
        "source": fairseq_models.make_dictionary(SOURCE_TOKENS, root / "dict.src.txt"),
        "target": fairseq_models.make_dictionary(TARGET_TOKENS, root / "dict.tgt.txt"),
        "source_path": str(root / "dict.src.txt"),
        "target_path": str(root / "dict.tgt.txt"),
    }


def parametrize_weight_norms(model):
    """Re-applies each of `model`'s weight norms with `parametrizations.weight_norm`
    (same `dim`), keeping `g` and `v`; returns the `{module name: dim}` changed."""
    state = model.state_dict()
    changed = {}
    for name, module in model.named_modules():
        hooks = [h for h in module._forward_pre_hooks.values() if isinstance(h, WeightNorm)]
        if hooks:
            changed[name] = hooks[0].dim
            torch.nn.utils.remove_weight_norm(module)
            parametrizations.weight_norm(module, dim=changed[name])
    # PyTorch's own compatibility hook loads weight_g/weight_v into original0/original1.
    model.load_state_dict(state)
    return changed


def fairseq_log_probs(model, sources, targets):
    with torch.no_grad():
        lengths = torch.tensor((sources != PAD_ID).sum(1))
        output = model(torch.tensor(sources), lengths, torch.tensor(targets))
        return model.get_normalized_probs(output, log_probs=True).numpy()


def batch(seed):
    """Left-padded sources ending in `</s>` and right-padded decoder inputs."""
    rng = np.random.default_rng(seed)
    sources = np.full([6, 9], PAD_ID, np.int64)
    targets = np.full([6, 7], PAD_ID, np.int64)
    for row in range(6):
        length = int(rng.integers(2, 10)) if row else 9
        tokens = rng.integers(4, len(SOURCE_TOKENS) + 4, length - 1)
        sources[row, 9 - length :] = [*tokens, EOS_ID]
        length = int(rng.integers(1, 8)) if row else 7
        targets[row, :length] = [EOS_ID, *rng.integers(4, len(TARGET_TOKENS) + 4, length - 1)]
    return sources, targets


def our_log_probs(model, sources, targets):
    inputs = {
        "source": tf.constant(sources, tf.int32),
        "target_input": tf.constant(targets, tf.int32),
    }
    return tf.nn.log_softmax(model(inputs)).numpy()


@pytest.fixture(scope="module", params=sorted(SPECS))
def both_spellings(request, dictionaries, tmp_path_factory):
    """The same fairseq model saved with `weight_g`/`weight_v` and parametrized."""
    root = tmp_path_factory.mktemp(f"parametrized_{request.param}")
    model, args = fairseq_models.build_model(
        SPECS[request.param], dictionaries["source"], dictionaries["target"], seed=5
    )
    plain_path = fairseq_models.save_checkpoint(model, args, root / "weight_g.pt")
    plain_state = {key: value.clone() for key, value in model.state_dict().items()}
    sources, targets = batch(seed=1)
    expected = fairseq_log_probs(model, sources, targets)
    changed = parametrize_weight_norms(model)
    parametrized_state = model.state_dict()
    parametrized_path = fairseq_models.save_checkpoint(model, args, root / "parametrized.pt")
    return {
        "plain_state": plain_state,
        "parametrized_state": parametrized_state,
        "changed": changed,
        "paths": (str(plain_path), str(parametrized_path)),
        "fairseq_model": model,
        "batch": (sources, targets),
        "expected": expected,
    }


def test_parametrized_names_are_g_and_v(both_spellings):
    # Confirms the spelling this importer reads against PyTorch itself: original0 is g,
    # original1 is v, with the same shapes, and no weight_g/weight_v key is left.
    plain, parametrized = both_spellings["plain_state"], both_spellings["parametrized_state"]
    changed = both_spellings["changed"]
    assert any(".convolutions." in name for name in changed)
    assert any(".attention." in name for name in changed)
    assert not any(key.endswith(("weight_g", "weight_v")) for key in parametrized)
    assert len(plain) == len(parametrized)
    for name in changed:
        for old, new in (("weight_g", PARAMETRIZED_G), ("weight_v", PARAMETRIZED_V)):
            assert parametrized[f"{name}.{new}"].shape == plain[f"{name}.{old}"].shape
            assert torch.equal(parametrized[f"{name}.{new}"], plain[f"{name}.{old}"])
    # The re-parametrized fairseq model still computes the same function.
    sources, targets = both_spellings["batch"]
    log_probs = fairseq_log_probs(both_spellings["fairseq_model"], sources, targets)
    np.testing.assert_allclose(log_probs, both_spellings["expected"], atol=1e-5)


def test_both_spellings_import_identically(both_spellings, dictionaries):
    models = [
        fairseq_fconv.load_fairseq_model(
            path, dictionaries["source_path"], dictionaries["target_path"]
        )
        for path in both_spellings["paths"]
    ]
    (plain, plain_config, *_), (parametrized, parametrized_config, *_) = models
    assert plain_config == parametrized_config
    # Paths without the model's own (numbered) name.
    paths = [[w.path.split("/", 1)[1] for w in model.weights] for model in (plain, parametrized)]
    assert paths[0] == paths[1]
    for ours, theirs in zip(plain.weights, parametrized.weights):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy(), err_msg=ours.path)
    sources, targets = both_spellings["batch"]
    plain_log_probs = our_log_probs(plain, sources, targets)
    np.testing.assert_array_equal(our_log_probs(parametrized, sources, targets), plain_log_probs)
    real = targets != PAD_ID
    assert np.abs(plain_log_probs - both_spellings["expected"])[real].max() < 1e-4


def test_weight_norm_name():
    assert fairseq_fconv.weight_norm_name(f"decoder.fc1.{PARAMETRIZED_G}") == "decoder.fc1.weight_g"
    assert fairseq_fconv.weight_norm_name(f"encoder.convolutions.0.{PARAMETRIZED_V}") == (
        "encoder.convolutions.0.weight_v"
    )
    for key in ("decoder.fc1.weight_g", "decoder.fc1.bias", "decoder.fc3.weight"):
        assert fairseq_fconv.weight_norm_name(key) == key


def _assign(both_spellings, dictionaries, state_dict):
    model, *_ = fairseq_fconv.load_fairseq_model(
        both_spellings["paths"][1], dictionaries["source_path"], dictionaries["target_path"]
    )
    fairseq_fconv.assign_weights(model, state_dict)


def test_missing_or_doubled_weight_norm_parameters_are_named(both_spellings, dictionaries):
    state = dict(both_spellings["parametrized_state"])
    module = "decoder.fc2"
    without_g = {k: v for k, v in state.items() if k != f"{module}.{PARAMETRIZED_G}"}
    with pytest.raises(
        FairseqImportError,
        match=rf"weight-norm v of {module} but not its g: neither {module}\.weight_g nor "
        rf"{module}\.parametrizations\.weight\.original0",
    ):
        _assign(both_spellings, dictionaries, without_g)
    without_v = {k: v for k, v in state.items() if k != f"{module}.{PARAMETRIZED_V}"}
    with pytest.raises(FairseqImportError, match=rf"weight-norm g of {module} but not its v"):
        _assign(both_spellings, dictionaries, without_v)
    without_both = {k: v for k, v in without_g.items() if k != f"{module}.{PARAMETRIZED_V}"}
    with pytest.raises(
        FairseqImportError,
        match=rf"no weight for {module}: neither {module}\.weight_g and {module}\.weight_v "
        rf".*{module}\.parametrizations\.weight\.original0 and \.original1.*plain "
        rf"{module}\.weight",
    ):
        _assign(both_spellings, dictionaries, without_both)
    doubled = {**state, f"{module}.weight_g": state[f"{module}.{PARAMETRIZED_G}"]}
    with pytest.raises(FairseqImportError, match=rf"twice, as .*{module}\.weight_g"):
        _assign(both_spellings, dictionaries, doubled)
    # A misshapen or unexpected parameter is reported under the name the file gives it.
    v = state[f"{module}.{PARAMETRIZED_V}"]
    misshapen = {**state, f"{module}.{PARAMETRIZED_V}": v[:, :-1].clone()}
    with pytest.raises(FairseqImportError, match=rf"Parameter '{module}\.{PARAMETRIZED_V}' has"):
        _assign(both_spellings, dictionaries, misshapen)
    extra = {**state, f"decoder.fc9.{PARAMETRIZED_G}": state[f"{module}.{PARAMETRIZED_G}"]}
    with pytest.raises(FairseqImportError, match=rf"does not: decoder\.fc9\.{PARAMETRIZED_G}"):
        _assign(both_spellings, dictionaries, extra)
