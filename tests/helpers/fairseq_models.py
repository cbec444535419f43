"""Random fairseq `fconv` models and checkpoints for the import and parity tests.

Needs PyTorch and fairseq (the `parity` extra). Models are built with fairseq's own
`FConvModel.build_model`, so their parameter names and layouts are exactly what a
fairseq training run saves.
"""

import argparse

import torch
from fairseq.data import Dictionary
from fairseq.models import ARCH_CONFIG_REGISTRY, fconv


def make_dictionary(tokens, path=None):
    """A fairseq `Dictionary` of `tokens` (after the 4 specials), saved to `path` if given."""
    dictionary = Dictionary()
    for index, token in enumerate(tokens):
        dictionary.add_symbol(token, n=1000 - index)
    if path is not None:
        dictionary.save(str(path))
    return dictionary


class _Task:
    def __init__(self, source_dictionary, target_dictionary):
        self.source_dictionary = source_dictionary
        self.target_dictionary = target_dictionary


def build_model(arguments, source_dictionary, target_dictionary, seed=0, output_scale=3.0):
    """A randomly initialised fairseq `FConvModel` in eval mode.

    Args:
        arguments: Model arguments (`arch` plus overrides), as on fairseq's command line.
        source_dictionary, target_dictionary: fairseq dictionaries.
        seed: Seed of every random value.
        output_scale: Factor on the output projection's gains (peakier distributions,
            fewer near-ties in beam search).

    Returns:
        `(model, args)`: the model and the complete `argparse.Namespace`.
    """
    torch.manual_seed(seed)
    args = argparse.Namespace(**arguments)
    ARCH_CONFIG_REGISTRY[args.arch](args)
    model = fconv.FConvModel.build_model(args, _Task(source_dictionary, target_dictionary))
    generator = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("weight_g"):
                # Gains away from ||v||: a mapping that ignored g could not pass.
                factor = 0.5 + torch.rand(parameter.shape, generator=generator)
                if name.startswith("decoder.fc3"):
                    factor = factor * output_scale
                parameter.mul_(factor)
            elif name.endswith("bias"):
                parameter.copy_(0.1 * torch.randn(parameter.shape, generator=generator))
    model.eval()
    return model, args


def save_checkpoint(model, args, path, style="args"):
    """Saves `model` as fairseq's trainer does: `args` (fairseq < 0.10) or `cfg` style."""
    state = {
        "model": model.state_dict(),
        "optimizer_history": [
            {
                "criterion_name": "LabelSmoothedCrossEntropyCriterion",
                "optimizer_name": "FairseqNAG",
                "lr_scheduler_state": {"best": 3.25},
                "num_updates": 1234,
            }
        ],
        "extra_state": {"epoch": 7, "val_loss": 3.25, "train_iterator": {"epoch": 7}},
        "last_optimizer_state": {"state": {}, "param_groups": [{"lr": 0.25, "momentum": 0.99}]},
    }
    if style == "args":
        state["args"] = args
    else:
        model_namespace = argparse.Namespace(**vars(args), _name=args.arch)
        state.update(args=None, cfg={"model": model_namespace, "task": {"_name": "translation"}})
    torch.save(state, str(path))
    return path
