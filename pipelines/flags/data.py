"""The data flags (corpus, preparation, batching) and what they configure."""

from typing import Any

from absl import flags

from convs2s_tf.data.cleaning import CleaningConfig
from convs2s_tf.data.prepare import PrepareConfig
from convs2s_tf.data.sources import LOCAL, MULTI30K, WMT_DATASETS
from convs2s_tf.data.text_files import INVALID_UTF8_POLICIES
from pipelines.flags.groups import BATCHING, DATA, FLAGS, PREPARE, flag_group

# The library's defaults, which the flags show and pass on.
_CLEANING = CleaningConfig()
_PREPARE = PrepareConfig(data_dir="")


@flag_group(DATA)
def define_data_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """Defines the corpus, cleaning and BPE flags (once; later calls no-op)."""
    if "data_dir" in flag_values:
        return
    # Corpus.
    flags.DEFINE_string(
        "data_dir",
        None,
        "Directory of the prepared data: SentencePiece model and vocabulary, prepared text, "
        "tokenised shards and summary.json. Created by pipelines.prepare_data, read by the others.",
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
    flags.DEFINE_string(
        "source_lang", _PREPARE.source_lang, "Source language code.", flag_values=flag_values
    )
    flags.DEFINE_string(
        "target_lang", _PREPARE.target_lang, "Target language code.", flag_values=flag_values
    )
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
    _define_cleaning_and_bpe_flags(flag_values)
    flags.DEFINE_integer(
        "num_shards",
        _PREPARE.num_shards,
        "Training shards to write (0: one per 100,000 pairs, at least 32). Each worker of "
        "a multi-host run reads whole shards: use at least as many as workers.",
        lower_bound=0,
        flag_values=flag_values,
    )


def _define_cleaning_and_bpe_flags(flag_values: flags.FlagValues) -> None:
    # Cleaning (training split only), defaults from the paper (section 4.1).
    flags.DEFINE_integer(
        "max_words",
        _CLEANING.max_words,
        "Drop training pairs with a side longer than this many words (0: no limit).",
        lower_bound=0,
        flag_values=flag_values,
    )
    flags.DEFINE_float(
        "max_length_ratio",
        _CLEANING.max_length_ratio,
        "Drop training pairs whose longer side has more than this many times the words of "
        "the shorter side (0: no limit).",
        lower_bound=0,
        flag_values=flag_values,
    )
    flags.DEFINE_enum(
        "invalid_utf8",
        _PREPARE.invalid_utf8,
        list(INVALID_UTF8_POLICIES),
        "Invalid UTF-8 in the corpus: 'error' stops naming the file and line; 'replace' "
        "substitutes U+FFFD and counts the lines in summary.json.",
        flag_values=flag_values,
    )
    # BPE.
    flags.DEFINE_integer(
        "vocab_size",
        _PREPARE.vocab_size,
        "Joint SentencePiece BPE vocabulary size, special tokens included (the paper's WMT "
        "setups use 40000).",
        lower_bound=5,
        flag_values=flag_values,
    )
    flags.DEFINE_float(
        "bpe_character_coverage",
        _PREPARE.bpe_character_coverage,
        "Share of characters the BPE model covers; rarer ones become <unk>.",
        lower_bound=0.9,
        upper_bound=1.0,
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "bpe_max_sentences",
        _PREPARE.bpe_max_sentences,
        "Train BPE on a seeded sample of this many sentences drawn from the whole training "
        "text when it has more (0: always all of it; a sample bounds memory on WMT-sized "
        "corpora).",
        lower_bound=0,
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "existing_sentencepiece_model",
        None,
        "Tokenise with this SentencePiece model (e.g. another data directory's "
        "sentencepiece.model) instead of training one: the ids then mean what they mean "
        "there; --vocab_size and the --bpe_* flags are unused.",
        flag_values=flag_values,
    )


@flag_group(PREPARE)
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
    flags.DEFINE_integer(
        "workers",
        _PREPARE.workers,
        "Processes tokenising the training split into shards (0: one per CPU core).",
        lower_bound=0,
        flag_values=flag_values,
    )


@flag_group(BATCHING)
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
        "Training pairs permuted together each epoch, in blocks of this many (0: the "
        "worker's pairs, up to 100,000; the shards are already shuffled globally).",
        lower_bound=0,
        flag_values=flag_values,
    )


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
    if flag_values.dataset == LOCAL and "train" not in split_prefixes:
        raise flags.ValidationError(
            "--dataset=local needs --train_prefix (and --valid_prefix, --test_prefix)."
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
        num_shards=flag_values.num_shards,
        workers=flag_values["workers"].value if "workers" in flag_values else 0,
        sentencepiece_model=flag_values.existing_sentencepiece_model or None,
    )


def prepare_config_flags(config: PrepareConfig) -> list[str]:
    """The data flags that describe `config` (`prepare_config_from_flags` reads them
    back): a flagfile that makes a later pipeline find that preparation up to date.

    The options without a flag (`seed`, `tfds_data_dir`) must be their defaults.
    """
    if config.seed != _PREPARE.seed or config.tfds_data_dir:
        raise ValueError("`seed` and `tfds_data_dir` have no flags; keep their defaults.")
    prefixes = dict(config.split_prefixes)
    flag_prefixes = {"train": "train_prefix", "validation": "valid_prefix", "test": "test_prefix"}
    return [
        f"--data_dir={config.data_dir}",
        f"--dataset={config.dataset}",
        f"--source_lang={config.source_lang}",
        f"--target_lang={config.target_lang}",
        # Every prefix, empty where a split is absent: it overrides an earlier flagfile's.
        *(f"--{flag}={prefixes.get(split, '')}" for split, flag in flag_prefixes.items()),
        f"--vocab_size={config.vocab_size}",
        f"--max_words={config.cleaning.max_words}",
        f"--max_length_ratio={config.cleaning.max_length_ratio}",
        f"--invalid_utf8={config.invalid_utf8}",
        f"--bpe_character_coverage={config.bpe_character_coverage}",
        f"--bpe_max_sentences={config.bpe_max_sentences}",
        f"--existing_sentencepiece_model={config.sentencepiece_model or ''}",
        f"--num_shards={config.num_shards}",
    ]


def eval_dataset_kwargs(flag_values: flags.FlagValues = FLAGS) -> dict[str, Any]:
    """Returns the keyword arguments of `pipeline.make_shard_eval_dataset` set by flags."""
    return {
        "max_tokens": flag_values.max_tokens,
        "max_sentences": flag_values.max_sentences or None,
        "max_source_positions": flag_values.max_source_positions,
        "max_target_positions": flag_values.max_target_positions,
    }


def training_dataset_kwargs(flag_values: flags.FlagValues = FLAGS, *, seed: int = 1) -> dict:
    """Returns the keyword arguments of `pipeline.TrainingData` set by flags; `seed` is
    the run's seed (shuffling)."""
    return {
        **eval_dataset_kwargs(flag_values),
        "shuffle_buffer_size": flag_values.shuffle_buffer_size or None,
        "seed": seed,
    }
