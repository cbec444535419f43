"""Writing a run of this project as a fairseq `fconv` checkpoint with its dictionaries.

The inverse of `fairseq_fconv.convert_checkpoint`. `export_run` writes::

    OUTPUT_DIR/checkpoint_best.pt      the model in fairseq 0.12's checkpoint format
    OUTPUT_DIR/dict.SRC.txt            the source dictionary (fairseq's format, our ids)
    OUTPUT_DIR/dict.TGT.txt            the target dictionary
    OUTPUT_DIR/sentencepiece.model     the run's SentencePiece model, if it has one

so that fairseq translates with it as with a model of its own::

    fairseq-interactive OUTPUT_DIR --path OUTPUT_DIR/checkpoint_best.pt -s SRC -t TGT \\
        --beam 5 --bpe sentencepiece --sentencepiece-model OUTPUT_DIR/sentencepiece.model

(`fairseq-generate` reads data binarised by `fairseq-preprocess --srcdict
OUTPUT_DIR/dict.SRC.txt --tgtdict OUTPUT_DIR/dict.TGT.txt`; `checkpoint_utils.
load_model_ensemble_and_task([checkpoint])` finds the dictionaries through the
checkpoint's task config, whose `data` is OUTPUT_DIR.)

The parameters are mapped by `fairseq_weights.fconv_modules`, the importer's mapping.
A trained run's ids are its SentencePiece ids, which start with fairseq's four special
symbols, so its dictionaries are the SentencePiece pieces in id order; a run imported
from fairseq keeps its own dictionaries. The checkpoint holds tensors, dicts, strings and
numbers only, not the `argparse.Namespace` of fairseq's own `fconv` checkpoints: fairseq
0.12 reads checkpoints with `torch.load`, which under PyTorch >= 2.6 loads nothing else.
"""

import collections
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from convs2s_tf import vocabulary
from convs2s_tf.interop.fairseq_checkpoint import FCONV_ARGUMENTS, import_torch
from convs2s_tf.interop.fairseq_dictionary import SPECIAL_SYMBOLS, Dictionary
from convs2s_tf.interop.fairseq_weights import TIED_OUTPUT, fconv_modules, module_parameters
from convs2s_tf.models import (
    ConvS2S,
    fairseq_architectures,
    fairseq_preset,
    format_layer_spec,
    parse_attention_spec,
    parse_layer_spec,
)
from convs2s_tf.models.convs2s.layer_spec import LayerSpec
from convs2s_tf.models.families import family_of
from convs2s_tf.runs import RunDirectory

CHECKPOINT_FILE = "checkpoint_best.pt"
SENTENCEPIECE_FILE = "sentencepiece.model"
DICTIONARY_FILE = "dict.{lang}.txt"
# Language codes of a run whose data names none.
DEFAULT_LANGUAGES = ("src", "tgt")
# fairseq 0.12's `TranslationConfig` defaults, resolved as its trainer saves them (the
# `II(...)` interpolations included): fairseq merges the saved task config with them.
_TRANSLATION_TASK = {
    "_name": "translation",
    "load_alignments": False,
    "left_pad_source": True,
    "left_pad_target": False,
    "upsample_primary": -1,
    "truncate_source": False,
    "num_batch_buckets": 0,
    "train_subset": "train",
    "dataset_impl": None,
    "required_seq_len_multiple": 1,
    "eval_bleu": False,
    "eval_bleu_args": "{}",
    "eval_bleu_detok": "space",
    "eval_bleu_detok_args": "{}",
    "eval_tokenized_bleu": False,
    "eval_bleu_remove_bpe": None,
    "eval_bleu_print_samples": False,
}
# The decoder's `version` buffer: 2 means weight norm per output unit (fairseq re-applies
# the norm per kernel tap to convolutions of a version-1 decoder).
_DECODER_VERSION = 2.0


class FairseqExportError(ValueError):
    """A run that cannot be written as a fairseq `fconv` model, or an unusable output."""


ExportResult = collections.namedtuple(
    "ExportResult",
    [
        "output_dir",
        "checkpoint_path",
        "source_lang",
        "target_lang",
        "sentencepiece_model",
        "architecture",
    ],
)
ExportResult.__doc__ = """What `export_run` wrote.

Fields:
    output_dir: The directory (fairseq's data directory for the dictionaries).
    checkpoint_path: The fairseq checkpoint.
    source_lang, target_lang: The language codes of `dict.SRC.txt` and `dict.TGT.txt`.
    sentencepiece_model: The SentencePiece model copied next to them, or None.
    architecture: The fairseq architecture named in the checkpoint.
"""


def check_exportable(config: Mapping[str, Any]) -> None:
    """Raises `FairseqExportError` unless fairseq's `fconv` can hold a `ConvS2S` of `config`
    (a run's model config)."""
    refusal = family_of(config).fairseq_refusal
    if refusal is not None:
        raise FairseqExportError(refusal)
    for side in ("source", "target"):
        if not config.get(f"{side}_positions", True):
            raise FairseqExportError(
                f"The model has no {side} position embeddings ({side}_positions=false), but "
                "fairseq's fconv always adds learned positions: it cannot represent this model."
            )
    if config.get("pad_id", vocabulary.PAD_ID) != vocabulary.PAD_ID:
        raise FairseqExportError(
            f"The model pads with id {config['pad_id']}; fairseq's dictionaries put <pad> at "
            f"{vocabulary.PAD_ID}."
        )


def _canonical(
    settings: Mapping[str, Any],
) -> tuple[Any, list[LayerSpec], list[LayerSpec], Any, list[bool], bool]:
    """The fconv settings that make an architecture, comparable (dropout aside)."""
    layers = {
        side: parse_layer_spec(str(settings[f"{side}_layers"])) for side in ("encoder", "decoder")
    }
    return (
        settings["embed_dim"],
        layers["encoder"],
        layers["decoder"],
        settings["decoder_out_embed_dim"],
        parse_attention_spec(settings["decoder_attention"], len(layers["decoder"])),
        bool(settings["share_decoder_input_output_embed"]),
    )


def fairseq_architecture(config: Mapping[str, Any]) -> str:
    """The fairseq architecture whose defaults are `config`'s layers and widths, else
    `"fconv"` (every argument is written out either way)."""
    canonical = _canonical(config)
    for architecture in fairseq_architectures()[1:]:
        if _canonical(fairseq_preset(architecture)) == canonical:
            return architecture
    return "fconv"


def fconv_model_config(config: Mapping[str, Any], architecture: str) -> dict[str, Any]:
    """fairseq's model config (`cfg.model`) of a `ConvS2S` of `config`."""
    settings = {name: config[ours] for name, ours in FCONV_ARGUMENTS.items()}
    _, encoder_layers, decoder_layers, _, attention, _ = _canonical(config)
    settings.update(
        encoder_layers=format_layer_spec(encoder_layers),
        decoder_layers=format_layer_spec(decoder_layers),
        decoder_attention=repr(attention),
        dropout=float(settings["dropout"]),
        share_input_output_embed=bool(settings["share_input_output_embed"]),
    )
    return {
        "_name": architecture,
        "arch": architecture,
        **settings,
        "encoder_embed_path": None,
        "decoder_embed_path": None,
        "max_source_positions": int(config["max_source_positions"]),
        "max_target_positions": int(config["max_target_positions"]),
    }


def fairseq_state_dict(model: ConvS2S) -> dict[str, np.ndarray]:
    """`model`'s parameters under fairseq's names and layouts (float32 arrays), in the
    order of fairseq's state dict, with the decoder's `version` buffer.

    Raises:
        FairseqExportError: A trainable variable no fairseq parameter holds.
    """
    modules = fconv_modules(model)
    exported: set[int] = set()
    state = {}
    for module in modules:
        if module.name == "decoder.embed_tokens":
            # fairseq's decoder registers the buffer before its modules.
            state["decoder.version"] = np.array([_DECODER_VERSION], np.float32)
        state.update(module_parameters(module))
        layer = module.layer
        variables = [layer.output_bias] if module.kind == TIED_OUTPUT else layer.trainable_weights
        exported.update(id(variable) for variable in variables)
    left_out = [v.path for v in model.trainable_weights if id(v) not in exported]
    if left_out:
        raise FairseqExportError(
            f"fairseq's fconv has no parameter for {', '.join(left_out)}: the model has parts "
            "fairseq cannot represent."
        )
    return state


def _sentencepiece_dictionary(path: str) -> Dictionary:
    """The dictionary of a trained run: its SentencePiece pieces in id order."""
    import sentencepiece as spm

    if not os.path.isfile(path):
        raise FileNotFoundError(f"SentencePiece model {path} does not exist.")
    processor = spm.SentencePieceProcessor(model_file=path)
    pieces = [processor.id_to_piece(index) for index in range(processor.get_piece_size())]
    if tuple(pieces[: len(SPECIAL_SYMBOLS)]) != SPECIAL_SYMBOLS:
        raise FairseqExportError(
            f"The SentencePiece model {path} numbers its first pieces "
            f"{pieces[: len(SPECIAL_SYMBOLS)]}, not fairseq's {list(SPECIAL_SYMBOLS)}: its ids "
            "are not a fairseq dictionary's."
        )
    return Dictionary.from_tokens(pieces[len(SPECIAL_SYMBOLS) :])


def fairseq_dictionaries(
    model_dir: str, run_config: Mapping[str, Any], sentencepiece_model: str | None = None
) -> tuple[Dictionary, Dictionary]:
    """The source and target `Dictionary` whose ids are the run's.

    Args:
        model_dir: The run directory.
        run_config: Its `config.json` content.
        sentencepiece_model: For a trained run, the SentencePiece model whose ids the
            model reads (default: the run's own).

    Raises:
        FairseqExportError: The run has no vocabulary, or one of other sizes than the
            model's embedding tables.
    """
    run = RunDirectory(model_dir)
    files = run.vocabulary_files(run_config)
    if files is not None:
        dictionaries = (Dictionary.load(files.source), Dictionary.load(files.target))
    else:
        path = sentencepiece_model or run.sentencepiece_model(run_config)
        if not path:
            raise FairseqExportError(
                f"{model_dir} names no SentencePiece model, whose pieces would be the "
                "dictionaries: give `sentencepiece_model`."
            )
        dictionaries = (_sentencepiece_dictionary(path),) * 2
    for side, dictionary in zip(("source", "target"), dictionaries):
        expected = run_config["model"][f"{side}_vocab_size"]
        if len(dictionary) != expected:
            raise FairseqExportError(
                f"The {side} vocabulary has {len(dictionary)} symbols but the model's {side} "
                f"embedding table {expected} rows: they are from different vocabularies."
            )
    return dictionaries


def run_languages(run: RunDirectory, run_config: Mapping[str, Any]) -> tuple[str, str]:
    """The language codes of a run (a `RunDirectory` and its config): its prepared
    data's, an imported run's fairseq arguments', else `DEFAULT_LANGUAGES`."""
    from convs2s_tf.data.data_directory import PreparedData

    if run_config.get("data_dir"):
        try:
            # Not None: the config names a data directory (checked just above).
            data = PreparedData.load(run.data_dir(run_config))  # type: ignore[arg-type]
            return data.source_lang, data.target_lang
        except FileNotFoundError:
            pass
    arguments = run_config.get("fairseq", {}).get("arguments", {})
    if arguments.get("source_lang") and arguments.get("target_lang"):
        return str(arguments["source_lang"]), str(arguments["target_lang"])
    return DEFAULT_LANGUAGES


def checkpoint_state(
    state_dict: Mapping[str, Any],
    model_config: Mapping[str, Any],
    task_config: Mapping[str, Any],
    provenance: Mapping[str, Any],
) -> dict[str, Any]:
    """A fairseq 0.12 checkpoint of `state_dict` (a dict of tensors), as its trainer saves
    one (what `checkpoint_utils.load_checkpoint_to_cpu` and its upgrade step read).

    Args:
        state_dict: The model's parameters.
        model_config: `cfg.model` (see `fconv_model_config`).
        task_config: `cfg.task`'s data directory and languages.
        provenance: Where the weights come from (kept in `extra_state`).
    """
    return {
        "args": None,
        "cfg": {
            "_name": None,
            "model": model_config,
            "task": {**_TRANSLATION_TASK, **task_config},
        },
        "model": state_dict,
        "optimizer_history": [
            {
                "criterion_name": "LabelSmoothedCrossEntropyCriterion",
                "optimizer_name": "FairseqNAG",
                "lr_scheduler_state": {"best": None},
                "num_updates": 0,
            }
        ],
        "extra_state": {"convs2s_tf": provenance},
        "last_optimizer_state": None,
    }


def _torch_state_dict(state: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """`state`'s arrays as tensors; a tied output projection shares the token table's."""
    torch = import_torch(FairseqExportError)
    tensors = {name: torch.from_numpy(np.ascontiguousarray(value)) for name, value in state.items()}
    table = tensors.get("decoder.embed_tokens.weight")
    if "decoder.fc3.weight" in tensors and torch.equal(tensors["decoder.fc3.weight"], table):
        tensors["decoder.fc3.weight"] = table
    return tensors


def export_run(
    model_dir: str,
    output_dir: str,
    checkpoint: str | None = None,
    sentencepiece_model: str | None = None,
    source_lang: str | None = None,
    target_lang: str | None = None,
) -> ExportResult:
    """Writes the run in `model_dir` as a fairseq `fconv` model (see the module docstring).

    Args:
        model_dir: A run directory (trained, averaged or imported from fairseq).
        output_dir: Where to write; it must not hold a `checkpoint_best.pt` already.
        checkpoint: A checkpoint of the run (default: the one inference uses).
        sentencepiece_model: For a trained run, the SentencePiece model its ids are
            (default: the run's own); for an imported run, one to copy for `--bpe
            sentencepiece` if the run has none.
        source_lang, target_lang: The dictionaries' language codes (default:
            `run_languages`).

    Returns:
        An `ExportResult`.

    Raises:
        FileNotFoundError, CheckpointError: No run or no checkpoint.
        FairseqExportError: A model fairseq cannot represent, or an unusable output.
    """
    from convs2s_tf.interop.vocabulary_tokenizer import tokenizer_for_run
    from convs2s_tf.runs import load_trained_model

    if "," in model_dir:
        raise FairseqExportError(
            "Export the runs of an ensemble one by one; fairseq ensembles them itself, "
            "given the path A/checkpoint_best.pt:B/checkpoint_best.pt."
        )
    path = os.path.join(output_dir, CHECKPOINT_FILE)
    if os.path.exists(path):
        raise FairseqExportError(f"{path} exists already; choose another `output_dir`.")
    run = RunDirectory(model_dir)
    run_config = run.read_config()
    check_exportable(run_config["model"])
    source, target = fairseq_dictionaries(model_dir, run_config, sentencepiece_model)
    default_languages = run_languages(run, run_config)
    source_lang = source_lang or default_languages[0]
    target_lang = target_lang or default_languages[1]
    if source_lang == target_lang and source.symbols != target.symbols:
        raise FairseqExportError(
            f"Source and target are both {source_lang!r} but their dictionaries differ; "
            "give distinct language codes."
        )
    model, _, checkpoint_path, _ = load_trained_model(
        model_dir, checkpoint, sentencepiece_model="", tokenizer_factory=tokenizer_for_run
    )
    config = model.get_config()
    architecture = fairseq_architecture(config)
    state = checkpoint_state(
        _torch_state_dict(fairseq_state_dict(model)),
        fconv_model_config(config, architecture),
        {
            "data": os.path.abspath(output_dir),
            "source_lang": source_lang,
            "target_lang": target_lang,
            "max_source_positions": config["max_source_positions"],
            "max_target_positions": config["max_target_positions"],
        },
        {"model_dir": os.path.abspath(model_dir), "checkpoint": checkpoint_path},
    )
    os.makedirs(output_dir, exist_ok=True)
    source.save(os.path.join(output_dir, DICTIONARY_FILE.format(lang=source_lang)))
    target.save(os.path.join(output_dir, DICTIONARY_FILE.format(lang=target_lang)))
    copied = _copy_sentencepiece_model(run, run_config, sentencepiece_model, output_dir)
    torch = import_torch(FairseqExportError)
    # Written last, through a temporary file: a directory without it holds no export.
    torch.save(state, path + ".tmp")
    os.replace(path + ".tmp", path)
    return ExportResult(output_dir, path, source_lang, target_lang, copied, architecture)


def _copy_sentencepiece_model(
    run: RunDirectory,
    run_config: Mapping[str, Any],
    sentencepiece_model: str | None,
    output_dir: str,
) -> str | None:
    """Copies the SentencePiece model (the given one, else the run's) into `output_dir`."""
    import shutil

    path = sentencepiece_model or run.sentencepiece_model(run_config)
    if not path:
        return None
    copied = os.path.join(output_dir, SENTENCEPIECE_FILE)
    shutil.copyfile(path, copied)
    return copied
