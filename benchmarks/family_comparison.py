"""ConvS2S against PoseNet for one seed: the arms trained one after the other on this
machine in their configs' budget (or all in --train_minutes), then scored and timed the
same way.

    python -m benchmarks.family_comparison --seed=1 [--runs_dir=runs/family_comparison] \\
        [--arms=convs2s:configs/multi30k_en_de.cfg,posenet_post:...,posenet_pre:...] \\
        [--equal_updates=posenet_pre] [--train_minutes=0] [--train_flags=] \\
        [--speed_rounds=3] [--nobuckets]

Each arm of --arms (`name:flagfile`), in order, alone on the machine: `pipelines.train`
into `RUNS_DIR/NAME_seedSEED` (its console in `.log`), timed; `pipelines.evaluate` on the
test split at --beam_size (sacreBLEU BLEU and chrF, lowercased `intl` BLEU, approx BLEU
padded and not). Then --speed_rounds rounds of `benchmarks.translate_speed`'s fresh
process of each arm's default export in turn (batch-1 mean over the first
--latency_sentences, first-pass sentences/s at --batch_size), each figure the median of
the rounds. With them: trainable parameters, updates, epochs and the median of the
epochs' target tokens/s. Every stage is kept on disk (`.train.json`, `.json`,
`.speedN.json` beside the run), so a re-run continues: a training stopped part-way (the
benchmark killed) resumes from its last checkpoint within its one budget, its console
appended to the log. A seed's stages are refused on another CPU than the one that made
the first of them (`seedN.machine.json`), and an arm's run trained by other arguments
(its log's last start). An arm of --equal_updates also
trains as `NAME_updates`, its budget and final annealing stretched to the first arm's
updates at its equal-time rate.
--train_flags go to every training after its flagfile's (on a CPU without bfloat16
instructions, `--train_flags=--training_dtype=float32`: the configs train in bfloat16).
Prints a table naming the CPU, then one JSON line; a seed's arms share one machine.
"""

import functools
import json
import os
import statistics
import subprocess

from absl import app, flags

from benchmarks import (
    ROOT,
    child_env,
    command_failed,
    cpu_description,
    last_json,
    main,
    python,
    run_python,
    stage_json,
    training_budget,
)
from convs2s_tf.models.posenet.comparison import (
    epoch_token_rates,
    equal_updates_budget,
    expanded_flagfile,
    format_arms_table,
    median_token_rate,
    trainable_parameters,
)

DEFAULT_ARMS = [
    "convs2s:configs/multi30k_en_de.cfg",
    "posenet_post:configs/posenet_paper_multi30k.cfg",
    "posenet_pre:configs/posenet_multi30k.cfg",
]
FLAGS = flags.FLAGS
# What starts each training process' part of an arm's log, before its command.
_LOG_START = "# started: "


def define_flags(flag_values=flags.FLAGS):
    define = {"flag_values": flag_values}
    flags.DEFINE_integer("seed", 1, "Training seed of both arms.", **define)
    arms = "The arms, `name:flagfile`, trained in this order."
    flags.DEFINE_list("arms", DEFAULT_ARMS, arms, **define)
    equal = (
        "Arms also trained to the first arm's updates (`NAME_updates`): the time budget scaled"
        " by the updates' ratio; the arm's own stop rule (a learning rate below its minimum)"
        " may end it sooner."
    )
    # The pre-norm config is the one PoseNet's users train; the paper's post-norm arm stays
    # on the unigram plateau at 58 minutes, where more updates at its shrunken rate add little.
    flags.DEFINE_list("equal_updates", ["posenet_pre"], equal, **define)
    budget = "Every arm's training minutes (0: its config's budget); equal-updates arms scale it."
    flags.DEFINE_float("train_minutes", 0.0, budget, **define)
    extra = "Flags of every arm's training, after its flagfile's (e.g. --training_dtype=float32)."
    flags.DEFINE_list("train_flags", [], extra, **define)
    runs_dir = os.path.join(ROOT, "runs", "family_comparison")
    flags.DEFINE_string("runs_dir", runs_dir, "Where the runs are written.", **define)
    flags.DEFINE_integer("beam_size", 5, "Beam of the test score.", **define)
    flags.DEFINE_integer("latency_sentences", 100, "Requests of one sentence each.", **define)
    flags.DEFINE_integer("batch_size", 128, "Sentences per request for throughput.", **define)
    rounds = "Rounds of timing every arm's export in turn; each figure is their median."
    flags.DEFINE_integer("speed_rounds", 3, rounds, **define, lower_bound=1)
    buckets = "Time the export with its compiled small-batch buckets (--nobuckets: graph mode)."
    flags.DEFINE_bool("buckets", True, buckets, **define)


def _model_figures(model_dir):
    """Trainable parameters (a shared table once), updates and training seconds of a run:
    its last checkpoint's step and budget account (training saves when it stops), over
    every process that trained it."""
    from convs2s_tf.runs import RunDirectory
    from convs2s_tf.runs.checkpoint_directory import checkpoint_step
    from convs2s_tf.runs.loading import build_model, read_run_config
    from convs2s_tf.training.checkpointing import recorded_state_value

    latest = RunDirectory(model_dir).latest_checkpoint()
    parameters = trainable_parameters(build_model(read_run_config(model_dir)["model"]))
    figures = {"parameters": parameters, "updates": checkpoint_step(latest) if latest else 0}
    # The run's training time over every process that trained it.
    seconds = recorded_state_value(latest, "train_seconds") if latest else None
    return {**figures, "train_seconds": round(seconds or 0.0, 1)}


def _command_text(command):
    """`python COMMAND...` as one line of text."""
    return f"python {' '.join(command)}"


def _start_line(command):
    """The log line that starts the part of `python COMMAND...`."""
    return _LOG_START + _command_text(command)


def _run_logged(command, log_path):
    """Runs `python COMMAND...`, its standard output and error appended to `log_path`.

    Raises:
        CommandError: It failed (the end of its log in the message).
    """
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(_start_line(command) + "\n")
        log.flush()
        status = subprocess.run(
            python(*command), cwd=ROOT, env=child_env(), stdout=log, stderr=subprocess.STDOUT
        ).returncode
    if status != 0:
        with open(log_path, encoding="utf-8") as f:
            raise command_failed(python(*command), status, f.read())


def _training_command(flagfile, model_dir, budget=None):
    """`pipelines.train`'s arguments for one arm, `budget`'s flags after its flagfile's."""
    command = ["-m", "pipelines.train", f"--flagfile={flagfile}", f"--model_dir={model_dir}"]
    command += FLAGS.train_flags
    command += [f"--{name}={value}" for name, value in (budget or {}).items()]
    return [*command, f"--seed={FLAGS.seed}"]


def _check_same_training(command, log_path):
    """Refuses to continue or reuse an arm that its log says another command trained.

    Raises:
        app.UsageError: The log's last training started with other arguments.
    """
    if not os.path.isfile(log_path):
        return
    with open(log_path, encoding="utf-8") as f:
        starts = [line for line in f.read().splitlines() if line.startswith(_LOG_START)]
    if starts and starts[-1] != _start_line(command):
        raise app.UsageError(
            f"{log_path} was trained by `{starts[-1].removeprefix(_LOG_START)}`, not by "
            f"`{_command_text(command)}`: give another --runs_dir."
        )


def train(command, model_dir):
    """Trains one arm by `command` (unless it finished before; a training stopped
    part-way resumes); returns its training figures."""
    log_path = f"{model_dir}.log"

    def run_training():
        _run_logged(command, log_path)
        return {"trained": True}

    stage_json(f"{model_dir}.train.json", run_training)
    with open(log_path, encoding="utf-8") as f:
        console = f.read()
    figures = _model_figures(model_dir)
    figures["epochs"] = len(epoch_token_rates(console))
    return {**figures, "train_tokens_per_sec": median_token_rate(console)}


def score(model_dir):
    """Test BLEU, chrF and approx BLEU of the model the run ends with."""
    evaluate = ["pipelines.evaluate", f"--model_dir={model_dir}", "--split=test"]
    options = [f"--beam_size={FLAGS.beam_size}", "--approx_bleu", "--json"]
    scores = last_json(run_python("-m", *evaluate, *options)[1])
    keys = ("bleu", "chrf", "bleu_lowercase_intl", "approx_bleu", "approx_bleu_unpadded")
    return {key: round(scores[key], 2) for key in keys}


def speed(model_dir):
    """Beam decoding speed of the run's default export in a fresh process."""
    export = "default" if FLAGS.buckets else "no_buckets"
    command = ["benchmarks.translate_speed", f"--model_dir={model_dir}", "--parts=exports"]
    command += [f"--exports={export}", f"--latency_sentences={FLAGS.latency_sentences}"]
    measured = last_json(run_python("-m", *command, f"--batch_size={FLAGS.batch_size}")[1])
    figures = measured["exports"][export]
    return {
        "batch1_ms": figures["batch1_mean_ms"],
        f"batch{FLAGS.batch_size}_sentences_per_sec": figures["batch_sentences_per_sec"],
    }


def arm_figures(name, flagfile, model_dir, budget=None):
    """Trains and scores one arm (unless `MODEL_DIR.json` holds its figures); returns
    its figures."""
    command = _training_command(flagfile, model_dir, budget)
    _check_same_training(command, f"{model_dir}.log")

    def measure():
        print(f"{name}: training {flagfile} into {model_dir} {budget or ''}", flush=True)
        return {"flagfile": flagfile, **train(command, model_dir), **score(model_dir)}

    figures = stage_json(f"{model_dir}.json", measure)
    print(f"{name}: {json.dumps(figures)}", flush=True)
    return figures


def timed_rounds(model_dirs):
    """Each arm's export speed: the median of --speed_rounds rounds, each timing every
    arm once in turn (`MODEL_DIR.speedN.json`), so that a slower spell of a shared
    machine falls on all arms alike. Returns {arm: figures}, with each round's."""
    measured = {name: [] for name in model_dirs}
    for number in range(1, FLAGS.speed_rounds + 1):
        for name, model_dir in model_dirs.items():
            path = f"{model_dir}.speed{number}.json"
            measured[name].append(stage_json(path, functools.partial(speed, model_dir)))
    return {
        name: {
            **{key: statistics.median(one[key] for one in rounds) for key in rounds[0]},
            "speed_rounds": rounds,
        }
        for name, rounds in measured.items()
    }


def run(options):
    """The benchmark with parsed `options` (this module's flags)."""
    global FLAGS
    FLAGS = options  # the functions above read the options from here
    runs_dir = os.path.abspath(FLAGS.runs_dir)
    os.makedirs(runs_dir, exist_ok=True)
    cpu = cpu_description()
    machine = stage_json(
        os.path.join(runs_dir, f"seed{FLAGS.seed}.machine.json"), lambda: {"cpu": cpu}
    )
    if machine["cpu"] != cpu:
        raise app.UsageError(
            f"{runs_dir} holds seed {FLAGS.seed}'s stages measured on {machine['cpu']}; this "
            f"machine is {cpu}. A seed's arms share one machine: give another --runs_dir."
        )
    arms, budget = {}, training_budget(FLAGS.train_minutes) if FLAGS.train_minutes else {}
    model_dirs = {}
    for arm in FLAGS.arms:
        name, _, flagfile = arm.partition(":")
        if not name or not flagfile or not os.path.isfile(os.path.join(ROOT, flagfile)):
            raise app.UsageError(f"--arms takes name:flagfile with an existing file; got {arm!r}.")
        model_dir = model_dirs[name] = os.path.join(runs_dir, f"{name}_seed{FLAGS.seed}")
        arms[name] = arm_figures(name, flagfile, model_dir, budget)
        if name in FLAGS.equal_updates and len(arms) > 1:
            first = next(iter(arms.values()))
            # The equal-time budget, --train_minutes's flags after the flagfile's.
            text = expanded_flagfile(flagfile, ROOT) + "".join(
                f"--{k}={v}\n" for k, v in budget.items()
            )
            stretched = equal_updates_budget(text, first["updates"], arms[name]["updates"])
            updates_dir = os.path.join(runs_dir, f"{name}_updates_seed{FLAGS.seed}")
            model_dirs[f"{name}_updates"] = updates_dir
            arms[f"{name}_updates"] = arm_figures(
                f"{name}_updates", flagfile, updates_dir, stretched
            )
    for name, figures in timed_rounds(model_dirs).items():
        arms[name].update(figures)
    print(f"\nseed {FLAGS.seed}, {cpu}\n{format_arms_table(arms)}")
    print(json.dumps({"seed": FLAGS.seed, "cpu": cpu, "arms": arms}))


if __name__ == "__main__":
    main(define_flags, run)
