"""The run and training flags, derived from `TrainingConfig`."""

from absl import flags

from convs2s_tf.training import STRATEGIES, TrainingConfig
from pipelines.flags.groups import FLAGS, RUN, TRAINING, flag_group


@flag_group(RUN)
def define_run_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """Defines --model_dir, the run directory train writes and the others read."""
    if "model_dir" in flag_values:
        return
    flags.DEFINE_string(
        "model_dir",
        None,
        "Run directory: checkpoints, config.json and TensorBoard events. Translate, "
        "evaluate and export also take several runs, comma-separated, as an ensemble.",
        flag_values=flag_values,
    )


@flag_group(TRAINING)
def define_training_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """Defines the training flags (defaults: the paper's optimisation, section 4.2)."""
    if "strategy" in flag_values:
        return

    defaults = TrainingConfig()
    flags.DEFINE_enum(
        "strategy",
        "mirrored",
        list(STRATEGIES),
        "tf.distribute strategy: mirrored (all local GPUs or the CPU), multi_worker "
        "(MultiWorkerMirroredStrategy from TF_CONFIG) or one_device.",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "cpu_replicas",
        0,
        "Split the CPU into this many logical devices with a replica on each (mirrored, "
        "multi_worker; 0 or 1: one CPU replica). For CPU-only machines and tests.",
        lower_bound=0,
        flag_values=flag_values,
    )
    flags.DEFINE_float(
        "max_train_minutes",
        0.0,
        "Keep training within this many minutes of wall time: stop at the last epoch end "
        "before it, judged by the last epoch's duration (0: no limit).",
        flag_values=flag_values,
    )
    flags.DEFINE_float(
        "anneal_final_minutes",
        0.0,
        "Cooldown: shrink the learning rate once by --lr_shrink at the first epoch end "
        "within this many minutes of --max_train_minutes, so a run the time limit ends "
        "before the plateau rule anneals it still ends at a low rate (0: none).",
        flag_values=flag_values,
    )
    flags.register_multi_flags_validator(
        ["anneal_final_minutes", "max_train_minutes"],
        lambda values: not values["anneal_final_minutes"]
        or 0 < values["anneal_final_minutes"] < values["max_train_minutes"],
        message="--anneal_final_minutes needs --max_train_minutes and must be between 0 and it.",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "test_beam_size",
        5,
        "After training, translate the test split with the model the run ends with (the "
        "averaged one with --average_last_n, else the best) and this beam and report BLEU "
        "(0 skips).",
        flag_values=flag_values,
    )
    for flag, field, help_text in _TRAINING_FLAGS:
        default = getattr(defaults, field)
        if field == "dtype":
            flags.DEFINE_enum(
                flag,
                default,
                ["float32", "bfloat16", "float16"],
                help_text,
                flag_values=flag_values,
            )
        else:
            _DEFINE[type(default)](flag, default, help_text, flag_values=flag_values)


_DEFINE = {
    int: flags.DEFINE_integer,
    float: flags.DEFINE_float,
    bool: flags.DEFINE_bool,
    str: flags.DEFINE_string,
}

# (flag, TrainingConfig field, help); the defaults are the dataclass's.
_TRAINING_FLAGS = (
    ("optimizer", "optimizer", "nag (Nesterov SGD, the paper's) or adam (Adam; AdamW with decay)."),
    ("learning_rate", "learning_rate", "Initial (peak) learning rate (paper, NAG: 0.25)."),
    ("momentum", "momentum", "Nesterov momentum (paper: 0.99)."),
    ("adam_beta1", "adam_beta1", "Adam's first-moment decay (SliceNet: 0.85)."),
    ("adam_beta2", "adam_beta2", "Adam's second-moment decay (SliceNet: 0.997)."),
    ("adam_epsilon", "adam_epsilon", "Adam's epsilon (SliceNet: 1e-6)."),
    ("weight_decay", "weight_decay", "Decoupled weight decay per update, times the rate."),
    ("warmup", "warmup", "Learning-rate warm-up: none, exponential (SliceNet) or noam."),
    ("warmup_steps", "warmup_steps", "Updates of the warm-up (SliceNet: 3000)."),
    ("clip_norm", "clip_norm", "Renormalise gradients above this global norm (0 = off)."),
    ("label_smoothing", "label_smoothing", "Label smoothing epsilon (0 = plain cross-entropy)."),
    ("lr_shrink", "lr_shrink", "Learning-rate factor after an epoch without improvement."),
    ("lr_threshold", "lr_threshold", "Relative validation-loss improvement that counts."),
    ("lr_patience", "lr_patience", "Epochs without improvement tolerated before a shrink."),
    ("min_learning_rate", "min_learning_rate", "Stop once the rate is at or below this."),
    ("max_epochs", "max_epochs", "Stop after this many epochs (0: no limit)."),
    ("max_steps", "max_steps", "Stop after this many updates (0: no limit)."),
    ("update_freq", "update_freq", "Batches accumulated per update (larger batches)."),
    ("save_every_steps", "save_every_steps", "Checkpoint every this many updates (0: epochs)."),
    ("keep_checkpoints", "keep_checkpoints", "Recent checkpoints kept (best/ is kept apart)."),
    (
        "average_last_n",
        "average_last_n",
        "When training ends, average the weights of the last N epoch ends into "
        "MODEL_DIR/averaged/, which the test score and the other pipelines then use (0: off).",
    ),
    ("max_nonfinite_steps", "max_nonfinite_steps", "Consecutive NaN/inf updates tolerated."),
    ("log_every_steps", "log_every_steps", "TensorBoard training-scalar interval, in updates."),
    ("valid_beam_size", "valid_beam_size", "Beam width of the validation BLEU (0 skips BLEU)."),
    ("valid_bleu_sentences", "valid_bleu_sentences", "Validation sentences decoded (0: all)."),
    (
        "attention_sentences",
        "attention_sentences",
        "Validation sentences whose attention is " "plotted per block.",
    ),
    ("sample_sentences", "sample_sentences", "Validation translations logged with references."),
    (
        "training_dtype",
        "dtype",
        "Training compute dtype: bfloat16 runs the matrix products in "
        "bfloat16 (variables and loss stay float32); float16 does the same in float16 with "
        "dynamic loss scaling (GPUs without bfloat16: V100, T4).",
    ),
    ("xla_train", "xla", "XLA-compile the training step."),
    ("progress_bar", "progress_bar", "Show a progress bar on the console."),
    ("seed", "seed", "Seed of initialisation, dropout and shuffling."),
)


def training_config_from_flags(flag_values: flags.FlagValues = FLAGS):
    """The `TrainingConfig` the training flags describe (validated)."""
    config = TrainingConfig(
        **{field: flag_values[flag].value for flag, field, _ in _TRAINING_FLAGS}
    )
    try:
        return config.validate()
    except ValueError as error:
        raise flags.ValidationError(f"Invalid training flags: {error}") from None
