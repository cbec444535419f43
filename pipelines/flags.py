"""Command-line flags of the pipelines, in groups, and their translation into library
arguments.

Each group (data, prepare, batching, model, run, training, checkpoint, inference, search,
translate, evaluate, export, import) is defined by one function here, with each flag's
default and help text. Every pipeline defines all groups, so that one flagfile
(configs/*.cfg) serves every pipeline (absl stops at an unknown flag in a flagfile), and
declares the groups it reads as its key flags (`declare_key_flags`): its --help lists
exactly those, --helpfull every flag. The functions turning flags into library arguments
live here too, so that pipelines stay thin.
"""

import functools
import os
import sys
from typing import Any

from absl import flags

from convs2s_tf.data.cleaning import CleaningConfig
from convs2s_tf.data.prepare import PrepareConfig
from convs2s_tf.data.sources import LOCAL, MULTI30K, WMT_DATASETS
from convs2s_tf.data.text_files import INVALID_UTF8_POLICIES
from convs2s_tf.decoding.search_config import COMPUTE_DTYPES, SearchConfig
from convs2s_tf.decoding.translator import BATCH_SIZE

FLAGS = flags.FLAGS

TOKENIZED_CACHE_MODES = ("memory", "disk")
CACHE_SUBDIR = "cache"

# Flag groups.
DATA = "data"
PREPARE = "prepare"
BATCHING = "batching"
MODEL = "model"
RUN = "run"
TRAINING = "training"
CHECKPOINT = "checkpoint"
INFERENCE = "inference"
SEARCH = "search"
TRANSLATE = "translate"
EVALUATE = "evaluate"
EXPORT = "export"
IMPORT = "import"

# Group name -> the function defining its flags, in definition order.
_GROUPS = {}


def _flag_group(name):
    """Registers the decorated function as the definition of flag group `name`."""

    def register(define):
        _GROUPS[name] = define
        return define

    return register


@_flag_group(DATA)
def define_data_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """Defines the corpus, cleaning and BPE flags (once; later calls no-op)."""
    if "data_dir" in flag_values:
        return
    # Corpus.
    flags.DEFINE_string(
        "data_dir",
        None,
        "Directory of the prepared data: SentencePiece model and vocabulary, prepared text, "
        "summary.json, and caches. Created by pipelines.prepare_data, read by the others.",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "dataset",
        MULTI30K,
        f"Corpus: '{MULTI30K}' (embedded, offline), '{LOCAL}' (text files given by "
        f"--train_prefix/--valid_prefix/--test_prefix), or a tfds catalog name with its "
        f"config: {', '.join(WMT_DATASETS)}.",
        flag_values=flag_values,
    )
    flags.DEFINE_string("source_lang", "en", "Source language code.", flag_values=flag_values)
    flags.DEFINE_string("target_lang", "de", "Target language code.", flag_values=flag_values)
    for split, flag_split in (("train", "train"), ("validation", "valid"), ("test", "test")):
        flags.DEFINE_string(
            f"{flag_split}_prefix",
            None,
            f"--dataset=local: prefix of the {split} files PREFIX.SRC and PREFIX.TGT "
            "(e.g. /corpus/train for /corpus/train.en, /corpus/train.de; plain or .gz).",
            flag_values=flag_values,
        )
    flags.DEFINE_string(
        "tfds_data_dir",
        None,
        "tfds data directory for Multi30k and catalog datasets (default: DATA_DIR/tfds). "
        "Point it at an existing one (e.g. ~/tensorflow_datasets) to reuse prepared data.",
        flag_values=flag_values,
    )
    # Cleaning (training split only), defaults from the paper (section 4.1).
    flags.DEFINE_integer(
        "max_words",
        175,
        "Drop training pairs with a side longer than this many words (0: no limit).",
        lower_bound=0,
        flag_values=flag_values,
    )
    flags.DEFINE_float(
        "max_length_ratio",
        1.5,
        "Drop training pairs whose longer side has more than this many times the words of "
        "the shorter side (0: no limit).",
        lower_bound=0,
        flag_values=flag_values,
    )
    flags.DEFINE_enum(
        "invalid_utf8",
        "error",
        list(INVALID_UTF8_POLICIES),
        "Invalid UTF-8 in the corpus: 'error' stops naming the file and line; 'replace' "
        "substitutes U+FFFD and counts the lines in summary.json.",
        flag_values=flag_values,
    )
    # BPE.
    flags.DEFINE_integer(
        "vocab_size",
        8000,
        "Joint SentencePiece BPE vocabulary size, special tokens included (the paper's WMT "
        "setups use 40000).",
        lower_bound=5,
        flag_values=flag_values,
    )
    flags.DEFINE_float(
        "bpe_character_coverage",
        1.0,
        "Share of characters the BPE model covers; rarer ones become <unk>.",
        lower_bound=0.9,
        upper_bound=1.0,
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "bpe_max_sentences",
        0,
        "Train BPE on a seeded sample of this many sentences (0: all; set it for WMT-sized "
        "corpora to bound memory).",
        lower_bound=0,
        flag_values=flag_values,
    )


@_flag_group(PREPARE)
def define_prepare_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """Defines the flags of pipelines.prepare_data besides the data flags."""
    if "force_prepare" in flag_values:
        return
    flags.DEFINE_bool(
        "force_prepare",
        False,
        "Prepare the data even if DATA_DIR is up to date with the corpus and flags.",
        flag_values=flag_values,
    )


@_flag_group(BATCHING)
def define_batching_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """Defines the input-pipeline flags of training: batches, shuffling, caching."""
    if "max_tokens" in flag_values:
        return
    flags.DEFINE_integer(
        "max_tokens",
        4000,
        "Token budget of a batch per replica, padding included (batch size x padded length, "
        "on source and target alike).",
        lower_bound=1,
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "max_sentences",
        0,
        "At most this many sentences per batch (0: only the token budget limits).",
        lower_bound=0,
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "shuffle_buffer_size",
        0,
        "Training pairs in the shuffle buffer (0: the whole corpus, up to 2,000,000).",
        lower_bound=0,
        flag_values=flag_values,
    )
    flags.DEFINE_enum(
        "tokenized_cache",
        "memory",
        list(TOKENIZED_CACHE_MODES),
        "Where the tokenised corpus is cached after the first pass: 'memory', or 'disk' "
        "(DATA_DIR/cache, reused across runs; for corpora larger than memory).",
        flag_values=flag_values,
    )


@_flag_group(MODEL)
def define_model_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """Defines the architecture flags: a preset, optional per-field overrides and the
    position tables' sizes."""
    if "arch" in flag_values:
        return
    from convs2s_tf.models import list_presets

    flags.DEFINE_enum(
        "arch",
        "multi30k_cpu",
        list_presets(),
        "Architecture preset (convs2s_tf/models/presets.py); the flags below override fields.",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "embed_dim", None, "Embedding width f (overrides the preset).", flag_values=flag_values
    )
    flags.DEFINE_string(
        "encoder_layers",
        None,
        "Encoder layer spec, e.g. '[(512,3)]*9 + [(1024,3)]*4' (overrides the preset).",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "decoder_layers",
        None,
        "Decoder layer spec (overrides the preset).",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "decoder_out_embed_dim",
        None,
        "Decoder width before the vocabulary projection (overrides the preset).",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "decoder_attention",
        None,
        "Decoder blocks with attention: True, False or a list like '[True, False]*2'.",
        flag_values=flag_values,
    )
    flags.DEFINE_float(
        "dropout",
        None,
        "Dropout drop probability (overrides the preset; paper 0.1-0.2).",
        flag_values=flag_values,
    )
    flags.DEFINE_bool(
        "share_decoder_input_output_embed",
        None,
        "Tie the decoder's output projection to its token table (needs out embed == embed).",
        flag_values=flag_values,
    )
    flags.DEFINE_bool(
        "source_positions",
        None,
        "Add learned source positions (default on).",
        flag_values=flag_values,
    )
    flags.DEFINE_bool(
        "target_positions",
        None,
        "Add learned target positions (default on).",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "max_source_positions",
        1024,
        "Source positions of the model; longer training pairs are dropped and counted, "
        "longer evaluation sources truncated (a sequence with </s> may have "
        "max_source_positions - 2 tokens).",
        lower_bound=3,
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "max_target_positions",
        1024,
        "Target positions of the model; as --max_source_positions for the target side.",
        lower_bound=3,
        flag_values=flag_values,
    )


_MODEL_OVERRIDES = (
    "embed_dim",
    "encoder_layers",
    "decoder_layers",
    "decoder_out_embed_dim",
    "decoder_attention",
    "dropout",
    "share_decoder_input_output_embed",
    "source_positions",
    "target_positions",
)


def model_config_from_flags(
    vocab_size: int, flag_values: flags.FlagValues = FLAGS
) -> dict[str, Any]:
    """`ConvS2S` constructor arguments: the preset, overridden by the flags that are set."""
    from convs2s_tf.models import ConvS2S, get_preset

    config = get_preset(flag_values.arch)
    for name in _MODEL_OVERRIDES:
        value = flag_values[name].value
        if value is not None:
            config[name] = value
    config.update(
        source_vocab_size=vocab_size,
        target_vocab_size=vocab_size,
        max_source_positions=flag_values.max_source_positions,
        max_target_positions=flag_values.max_target_positions,
    )
    try:
        # Validates the combination (specs, shared embedding sizes, ...) without building.
        config = ConvS2S(**config).get_config()
    except ValueError as error:
        raise flags.ValidationError(f"Invalid model flags: {error}") from None
    for key in ("name", "trainable", "dtype"):
        config.pop(key, None)
    return config


@_flag_group(RUN)
def define_run_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """Defines --model_dir, the run directory train writes and the others read."""
    if "model_dir" in flag_values:
        return
    flags.DEFINE_string(
        "model_dir",
        None,
        "Run directory: checkpoints, config.json and TensorBoard events.",
        flag_values=flag_values,
    )


@_flag_group(TRAINING)
def define_training_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """Defines the training flags (defaults: the paper's optimisation, section 4.2)."""
    if "strategy" in flag_values:
        return
    from convs2s_tf.training import STRATEGIES

    define = {
        int: flags.DEFINE_integer,
        float: flags.DEFINE_float,
        bool: flags.DEFINE_bool,
        str: flags.DEFINE_string,
    }
    flags.DEFINE_enum(
        "strategy",
        "mirrored",
        list(STRATEGIES),
        "tf.distribute strategy: mirrored (all local GPUs or the CPU), multi_worker "
        "(MultiWorkerMirroredStrategy from TF_CONFIG) or one_device.",
        flag_values=flag_values,
    )
    flags.DEFINE_float(
        "max_train_minutes",
        0.0,
        "Keep training within this many minutes of wall time: stop at the last epoch end "
        "before it, judged by the last epoch's duration (0: no limit).",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "test_beam_size",
        5,
        "After training, translate the test split with the best checkpoint and this beam "
        "and report BLEU (0 skips).",
        flag_values=flag_values,
    )
    for name, default, help_text in _TRAINING_FLAGS:
        define[type(default)](name, default, help_text, flag_values=flag_values)


# (flag, default, help): each maps onto the TrainingConfig field of the same name.
_TRAINING_FLAGS = (
    ("learning_rate", 0.25, "Initial learning rate of Nesterov SGD (paper: 0.25)."),
    ("momentum", 0.99, "Nesterov momentum (paper: 0.99)."),
    ("clip_norm", 0.1, "Renormalise gradients above this global norm (paper: 0.1; 0 = off)."),
    ("label_smoothing", 0.1, "Label smoothing epsilon (0 = plain cross-entropy)."),
    ("lr_shrink", 0.1, "Learning-rate factor after an epoch without validation improvement."),
    ("lr_threshold", 1e-4, "Relative validation-loss improvement that counts (fairseq's)."),
    ("lr_patience", 0, "Epochs without improvement tolerated before a shrink."),
    ("min_learning_rate", 1e-4, "Stop once the learning rate is at or below this."),
    ("max_epochs", 0, "Stop after this many epochs (0: no limit)."),
    ("max_steps", 0, "Stop after this many updates (0: no limit)."),
    ("update_freq", 1, "Batches accumulated per update (emulates update_freq x larger batches)."),
    ("save_every_steps", 1000, "Checkpoint every this many updates (0: only at epoch ends)."),
    ("keep_checkpoints", 3, "Recent checkpoints kept (the best is kept separately in best/)."),
    ("max_nonfinite_steps", 5, "Consecutive NaN/inf updates tolerated before stopping."),
    ("log_every_steps", 100, "TensorBoard training-scalar interval, in updates."),
    ("valid_beam_size", 5, "Beam width of the validation BLEU (0 skips BLEU)."),
    ("valid_bleu_sentences", 0, "Validation sentences decoded for BLEU (0: all)."),
    ("attention_sentences", 3, "Validation sentences whose attention is plotted per block."),
    ("sample_sentences", 5, "Validation translations logged next to their references."),
    ("mixed_precision", False, "Compute in bfloat16 with float32 variables and loss."),
    ("jit_compile", False, "XLA-compile the training step."),
    ("progress_bar", True, "Show a progress bar on the console."),
    ("seed", 1, "Seed of initialisation, dropout and shuffling."),
)


def training_config_from_flags(flag_values: flags.FlagValues = FLAGS):
    """The `TrainingConfig` the training flags describe (validated)."""
    from convs2s_tf.training import TrainingConfig

    config = TrainingConfig(**{name: flag_values[name].value for name, _, _ in _TRAINING_FLAGS})
    try:
        return config.validate()
    except ValueError as error:
        raise flags.ValidationError(f"Invalid training flags: {error}") from None


@_flag_group(CHECKPOINT)
def define_checkpoint_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """Defines the flags choosing the checkpoint and tokenizer a model is loaded with."""
    if "checkpoint" in flag_values:
        return
    flags.DEFINE_string(
        "checkpoint",
        None,
        "Checkpoint to use instead of --model_dir's best (else latest) one; for "
        "pipelines.import_fairseq, the fairseq .pt checkpoint to convert.",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "sentencepiece_model",
        None,
        "SentencePiece model to tokenise text with instead of the run's own. For a model "
        "imported from fairseq: the model its dictionaries' pieces come from (plain text in "
        "and out); without one such a model reads and writes space-separated tokens.",
        flag_values=flag_values,
    )


@_flag_group(INFERENCE)
def define_inference_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """Defines the flags shared by the pipelines that translate text: translate, evaluate."""
    if "saved_model" in flag_values:
        return
    flags.DEFINE_string(
        "saved_model",
        None,
        "Translate with this SavedModel (a version directory, or a base directory whose "
        "newest version is used) instead of --model_dir's checkpoint.",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "batch_size", BATCH_SIZE, "Sentences translated per batch.", flag_values=flag_values
    )


# Flag -> the `SearchConfig` field it sets. All but --nbest are the search group, fixed
# in an export; --nbest, which only pipelines.translate reads, is the translate group.
SEARCH_FLAG_FIELDS = {
    "beam_size": "beam_size",
    "nbest": "nbest",
    "max_len_a": "max_len_a",
    "max_len_b": "max_len_b",
    "min_length": "min_length",
    "length_penalty": "length_penalty",
    "unk_penalty": "unk_penalty",
    "inference_dtype": "dtype",
    "xla_decode": "xla",
}


@_flag_group(SEARCH)
def define_search_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """Defines the beam-search flags; their defaults are `SearchConfig`'s."""
    if "beam_size" in flag_values:
        return
    defaults = SearchConfig()
    flags.DEFINE_integer(
        "beam_size", defaults.beam_size, "Beam width (1: greedy search).", flag_values=flag_values
    )
    flags.DEFINE_float(
        "max_len_a",
        defaults.max_len_a,
        "Maximum output length a * source_length + b: a (paper: 0).",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "max_len_b",
        defaults.max_len_b,
        "Maximum output length a * source_length + b: b (paper: 200).",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "min_length",
        defaults.min_length,
        "Minimum number of tokens before </s>.",
        flag_values=flag_values,
    )
    flags.DEFINE_float(
        "length_penalty",
        defaults.length_penalty,
        "alpha in score / length ** alpha (1: plain normalisation).",
        flag_values=flag_values,
    )
    flags.DEFINE_float(
        "unk_penalty",
        defaults.unk_penalty,
        "Subtracted from the log-probability of <unk>.",
        flag_values=flag_values,
    )
    flags.DEFINE_enum(
        "inference_dtype",
        defaults.dtype,
        list(COMPUTE_DTYPES),
        "Compute dtype of translation from a checkpoint and of exports: bfloat16 runs the "
        "matrix products in bfloat16 (weights stay float32; softmax and scores float32).",
        flag_values=flag_values,
    )
    flags.DEFINE_bool(
        "xla_decode",
        defaults.xla,
        "XLA-compile the decoder step (sources padded to a multiple of 16 tokens; finished "
        "sentences stay in the batch so shapes stay static).",
        flag_values=flag_values,
    )


@_flag_group(TRANSLATE)
def define_translate_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """Defines the flags of pipelines.translate: input, output, n-best lists, attention."""
    if "nbest" in flag_values:
        return
    flags.DEFINE_integer(
        "nbest",
        SearchConfig().nbest,
        "Hypotheses written per sentence (at most --beam_size).",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "input",
        None,
        "Text file to translate, one sentence per line (default: stdin).",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "output", None, "Where translations go (default: stdout).", flag_values=flag_values
    )
    flags.DEFINE_string(
        "attention_dir",
        None,
        "Write one attention heatmap PNG per sentence here (tokens on the axes).",
        flag_values=flag_values,
    )


@_flag_group(EVALUATE)
def define_evaluate_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """Defines the flags of pipelines.evaluate: what is scored, and how it is printed."""
    if "source" in flag_values:
        return
    flags.DEFINE_string(
        "source", None, "pipelines.evaluate: source file to translate.", flag_values=flag_values
    )
    flags.DEFINE_string(
        "reference", None, "pipelines.evaluate: reference file.", flag_values=flag_values
    )
    flags.DEFINE_enum(
        "split",
        "test",
        ["train", "validation", "test"],
        "pipelines.evaluate: prepared split of --data_dir to score when --source is not given.",
        flag_values=flag_values,
    )
    flags.DEFINE_bool(
        "json",
        False,
        "pipelines.evaluate: print the scores as one JSON object.",
        flag_values=flag_values,
    )


@_flag_group(EXPORT)
def define_export_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """Defines the flags of pipelines.export besides the run, checkpoint and search."""
    if "export_dir" in flag_values:
        return
    flags.DEFINE_string(
        "export_dir",
        None,
        "Export base directory, e.g. saved_models/multi30k_en_de: each export writes the "
        "next version under it (TF Serving layout).",
        flag_values=flag_values,
    )


def search_config_from_flags(
    flag_values: flags.FlagValues = FLAGS, *, with_nbest: bool = True
) -> SearchConfig:
    """The validated `SearchConfig` of the search flags (and --nbest).

    Args:
        flag_values: The parsed flags.
        with_nbest: False for the pipelines that ignore --nbest (evaluate scores the best
            hypothesis, an export returns the whole beam): `nbest` keeps its default.

    Raises:
        flags.ValidationError: naming the first setting that cannot work.
    """
    config = SearchConfig(
        **{
            field: flag_values[name].value
            for name, field in SEARCH_FLAG_FIELDS.items()
            if with_nbest or name != "nbest"
        }
    )
    try:
        return config.validate()
    except ValueError as error:
        raise flags.ValidationError(str(error)) from None


@_flag_group(IMPORT)
def define_import_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """Defines the flags of pipelines.import_fairseq (besides --checkpoint and
    --sentencepiece_model)."""
    if "source_dict" in flag_values:
        return
    flags.DEFINE_string(
        "source_dict",
        None,
        "pipelines.import_fairseq: the fairseq source dictionary (dict.SRC.txt of the "
        "model's data-bin directory).",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "target_dict",
        None,
        "pipelines.import_fairseq: the fairseq target dictionary (dict.TGT.txt; the same "
        "file as --source_dict for a joined dictionary).",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "output_dir",
        None,
        "pipelines.import_fairseq: run directory to write (config.json, best/, the "
        "dictionaries); use it as --model_dir of the other pipelines.",
        flag_values=flag_values,
    )


def define_all_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """Defines every flag of every pipeline (so one flagfile serves all of them)."""
    for define in _GROUPS.values():
        define(flag_values)


@functools.cache
def group_flags(group: str) -> tuple[str, ...]:
    """The names of the flags of `group` (one of DATA, PREPARE, ...), in definition order."""
    flag_values = flags.FlagValues()
    _GROUPS[group](flag_values)
    return tuple(flag_values)


_VERBOSITY_HELP = (
    "Logging verbosity: -1 (the pipelines' default) shows warnings and errors only, 0 adds "
    "INFO logs and, given on the command line, TensorFlow's start-up messages; 1 DEBUG."
)


def declare_key_flags(
    *groups: str, also: tuple[str, ...] = (), flag_values: flags.FlagValues = FLAGS
) -> None:
    """Defines every flag, and declares the flags the calling pipeline reads as its key
    flags: the ones its --help lists (--helpfull lists all).

    Args:
        *groups: The flag groups the pipeline reads (DATA, MODEL, SEARCH, ...).
        also: Single flags it reads from other groups (e.g. evaluate's --data_dir).
        flag_values: Where the flags are defined.
    """
    define_all_flags(flag_values)
    caller = sys._getframe(1).f_globals["__name__"]
    # absl files the main module's key flags under sys.argv[0], where --help looks them
    # up (FlagValues.main_module_help).
    module_name = sys.argv[0] if caller == "__main__" else caller
    names = [name for group in groups for name in group_flags(group)] + list(also)
    if "verbosity" in flag_values:
        # Every pipeline honours it (pipelines.cli, pipelines.console); absl's own help
        # describes app.run's INFO default, which the pipelines lower to WARNING.
        flag_values["verbosity"].help = _VERBOSITY_HELP
        names.append("verbosity")
    for name in names:
        flag_values.register_key_flag_for_module(module_name, flag_values[name])


def _require_data_dir(flag_values: flags.FlagValues) -> str:
    if not flag_values.data_dir:
        raise flags.ValidationError("--data_dir is required.")
    return flag_values.data_dir


def prepare_config_from_flags(flag_values: flags.FlagValues = FLAGS) -> PrepareConfig:
    """Returns the `PrepareConfig` the data flags describe."""
    split_prefixes = {
        split: prefix
        for split, prefix in (
            ("train", flag_values.train_prefix),
            ("validation", flag_values.valid_prefix),
            ("test", flag_values.test_prefix),
        )
        if prefix
    }
    if flag_values.dataset != LOCAL and split_prefixes:
        raise flags.ValidationError(
            "--train_prefix/--valid_prefix/--test_prefix need --dataset=local."
        )
    return PrepareConfig(
        data_dir=_require_data_dir(flag_values),
        dataset=flag_values.dataset,
        source_lang=flag_values.source_lang,
        target_lang=flag_values.target_lang,
        split_prefixes=split_prefixes,
        tfds_data_dir=flag_values.tfds_data_dir,
        vocab_size=flag_values.vocab_size,
        cleaning=CleaningConfig(
            max_words=flag_values.max_words, max_length_ratio=flag_values.max_length_ratio
        ),
        invalid_utf8=flag_values.invalid_utf8,
        bpe_character_coverage=flag_values.bpe_character_coverage,
        bpe_max_sentences=flag_values.bpe_max_sentences,
    )


def eval_dataset_kwargs(flag_values: flags.FlagValues = FLAGS) -> dict[str, Any]:
    """Returns the keyword arguments of `pipeline.make_eval_dataset` set by flags."""
    cache_dir = None
    if flag_values.tokenized_cache == "disk":
        cache_dir = os.path.join(_require_data_dir(flag_values), CACHE_SUBDIR)
    return {
        "max_tokens": flag_values.max_tokens,
        "max_sentences": flag_values.max_sentences or None,
        "max_source_positions": flag_values.max_source_positions,
        "max_target_positions": flag_values.max_target_positions,
        "cache_dir": cache_dir,
    }


def training_dataset_kwargs(flag_values: flags.FlagValues = FLAGS, *, seed: int = 1) -> dict:
    """Returns the keyword arguments of `pipeline.make_training_dataset` (and
    `TrainingDatasetFn`) set by flags; `seed` is the run's seed (shuffling)."""
    return {
        **eval_dataset_kwargs(flag_values),
        "shuffle_buffer_size": flag_values.shuffle_buffer_size or None,
        "seed": seed,
    }
