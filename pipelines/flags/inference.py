"""The flags of the pipelines that use a trained model: checkpoint, search, translate,
evaluate, export and import."""

from absl import flags

from convs2s_tf.decoding.search_config import COMPUTE_DTYPES, SearchConfig
from convs2s_tf.inference import BATCH_SIZE
from pipelines.flags.groups import (
    CHECKPOINT,
    EVALUATE,
    EXPORT,
    FLAGS,
    IMPORT,
    INFERENCE,
    SEARCH,
    TRANSLATE,
    flag_group,
)


@flag_group(CHECKPOINT)
def define_checkpoint_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """Defines the flags choosing the checkpoint and tokenizer a model is loaded with."""
    if "checkpoint" in flag_values:
        return
    flags.DEFINE_string(
        "checkpoint",
        None,
        "Checkpoint to use instead of --model_dir's best (else latest) one (for an "
        "ensemble, --model_dir=RUN_A,RUN_B: one per run, comma-separated); for "
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


@flag_group(INFERENCE)
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
    "int8_weights": "int8_weights",
    "search_parts": "parts",
}


@flag_group(SEARCH)
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
    flags.DEFINE_bool(
        "int8_weights",
        defaults.int8_weights,
        "Hold the model's matrix weights as int8 (a scale per output column) and round each "
        "row a search step multiplies by them to int8 (float32 only). Batches of up to 128 "
        "sentences are then searched by compiled buckets whose products run on the CPU's "
        "8-bit units (AMX, VNNI); with --shortlist it is slower at large batches. "
        "docs/performance.md gives its speed and BLEU.",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "search_parts",
        defaults.parts,
        "Search a batch (beyond the compiled buckets) as this many searches of its rows, "
        "side by side: with one intra-op thread per search (pipelines.translate and "
        "pipelines.evaluate set it; TF Serving: --tensorflow_intra_op_parallelism=1) each "
        "takes a core, so a lone batch uses them all. Set it to the cores a request "
        "should use; translations do not change. Not with --shortlist.",
        lower_bound=1,
        flag_values=flag_values,
    )
    flags.DEFINE_bool(
        "shortlist",
        False,
        "Decode each batch against a shortlist of target pieces (the union of its source "
        "pieces' likely translations, the most frequent pieces and the special tokens) "
        "instead of the whole vocabulary: the run's shortlist.npz, written by "
        "pipelines.build_shortlist. Exports store it.",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "shortlist_file",
        None,
        "A shortlist file to decode against instead of the run's own (implies --shortlist).",
        flag_values=flag_values,
    )


@flag_group(TRANSLATE)
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
        "output",
        None,
        "Where translations go (default: stdout); pipelines.evaluate: also write the "
        "hypotheses scored there, one per line in corpus order.",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "attention_dir",
        None,
        "Write one attention heatmap PNG per sentence here (tokens on the axes).",
        flag_values=flag_values,
    )


@flag_group(EVALUATE)
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
    flags.DEFINE_bool(
        "approx_bleu",
        False,
        "pipelines.evaluate: also give tensor2tensor's approx BLEU of --split (the argmax "
        "of teacher-forced logits on pieces, per batch: what SliceNet and PoseNet report; "
        "not a translation score). One --model_dir, prepared data.",
        flag_values=flag_values,
    )


@flag_group(EXPORT)
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
    flags.DEFINE_bool(
        "xla_small_batches",
        True,
        "Search batches of up to 8 sentences of up to 64 tokens as one XLA computation per "
        "bucket of 1, 2, 4 or 8 sentences, compiled while the export loads (its warm-up "
        "requests cover every bucket); TF Serving then needs "
        "--xla_cpu_compilation_enabled=true. --noxla_small_batches: graph mode only. Float32 "
        "exports only: a bfloat16 export searches in graph mode (XLA on CPU does not use the "
        "bfloat16 units and rounds differently).",
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


@flag_group(IMPORT)
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
        "Run directory to write (config.json, best/): pipelines.import_fairseq's converted "
        "model with its dictionaries, pipelines.average_checkpoints' averaged weights; use "
        "it as --model_dir of the other pipelines. pipelines.export_fairseq: the directory "
        "of the fairseq checkpoint and dictionaries it writes.",
        flag_values=flag_values,
    )
