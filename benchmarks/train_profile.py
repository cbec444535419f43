"""Why the bfloat16 training step's speed depends on the machine: where its time goes
(TensorFlow's profiler), and its rate when oneDNN may use only older instruction sets.

    python -m benchmarks.train_profile [--preset=iwslt_de_en] [--max_tokens=4000] \\
        [--steps=40] [--isas=default,AVX512_CORE,AVX2] [--dtypes=bfloat16,float32]

Each measurement is `benchmarks.train_throughput`'s (the real input pipeline and training
step, one untimed epoch, then --steps timed updates) in a fresh process:

1. **Rates by instruction set.** For each of --isas (oneDNN's `ONEDNN_MAX_CPU_ISA`:
   `default` whatever this CPU has; `AVX512_CORE` AVX-512 without its bfloat16 dot
   products, as on CPUs before Intel Cooper Lake and AMD Zen 4; `AVX2`, as on AMD Zen 2
   and Zen 3) and each of --dtypes: target tokens/s.
2. **Profiles.** Each of --dtypes again at the default instruction set, the timed steps
   traced by TensorFlow's profiler: milliseconds per step of the matrix products (MatMul,
   BatchMatMul and convolution kernels), the casts between float32 and bfloat16, the
   XLA-compiled loss, the other elementwise operations and reductions, the optimiser's
   updates, the all-reduce and the input pipeline, each with its share of the step's
   operation time (which exceeds the wall time when two operations run at once on two
   cores), and the wall time in which no operation runs.

A variant oneDNN cannot train (bfloat16 under `AVX2` dies with SIGSEGV on TensorFlow
2.21) is reported as failed. Prints the CPU, both tables, then one JSON line. About 25
minutes on 2 cores with the defaults (`--isas=`: the profiles alone, about 8); run it
alone on the machine.
"""

import json
import os
import subprocess
import sys
import tempfile

from absl import app, flags

from benchmarks import op_profile
from benchmarks.comparison_report import cpu_description
from benchmarks.config_models import FLAGFILE, ROOT, throughput_command

CATEGORIES = (
    "products",
    "casts",
    "loss (XLA)",
    "elementwise and reductions",
    "optimiser",
    "all-reduce",
    "input pipeline",
)

flags.DEFINE_string("preset", "iwslt_de_en", "Architecture preset (as train_throughput's).")
flags.DEFINE_integer("max_tokens", 4000, "Token budget per batch.")
flags.DEFINE_integer("steps", 40, "Timed (and profiled) updates after the untimed epoch.")
flags.DEFINE_list(
    "isas", ["default", "AVX512_CORE", "AVX2"], "oneDNN's ISA limits (empty: profiles only)."
)
flags.DEFINE_list("dtypes", ["bfloat16", "float32"], "Training compute dtypes.")
flags.DEFINE_string("config", FLAGFILE, "Pipeline flagfile naming the prepared data.")
FLAGS = flags.FLAGS


def category_of(operation):
    """The `CATEGORIES` entry of a profiled `op_profile.Operation`."""
    op_type, scopes = operation.op_type, operation.op_name.split("/")
    if not op_type:
        return "loss (XLA)"  # an XLA thunk: the compiled loss is the step's only one
    if operation.product:
        return "products"
    if op_type == "Cast":
        return "casts"
    if op_type.startswith("ResourceApply") or any("optimizer" in s.lower() for s in scopes):
        return "optimiser"
    if "Collective" in op_type or "AllReduce" in op_type:
        return "all-reduce"
    if "Iterator" in op_type or "Dataset" in op_type:
        return "input pipeline"
    return "elementwise and reductions"


def profile_by_category(log_dir, wall_seconds, steps):
    """{category: milliseconds per step} (with `idle`: wall time no operation covers)."""
    timed, busy_seconds = op_profile.operation_seconds(log_dir)
    seconds = dict.fromkeys(CATEGORIES, 0.0)
    for operation, duration in timed:
        seconds[category_of(operation)] += duration
    seconds["idle"] = max(0.0, wall_seconds - busy_seconds)
    return {name: round(1000.0 * value / steps, 2) for name, value in seconds.items()}


def _measure(dtype, isa, profile_dir=None):
    """train_throughput's figures for `dtype` with oneDNN limited to `isa`."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", KERAS_BACKEND="tensorflow")
    if isa != "default":
        env["ONEDNN_MAX_CPU_ISA"] = isa
    command = throughput_command(
        dtype, FLAGS.preset, FLAGS.max_tokens, FLAGS.steps, FLAGS.config, profile_dir
    )
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        # A limit oneDNN cannot train under (bfloat16 under AVX2 dies with SIGSEGV here)
        # is a result too: reported, not fatal.
        how = f"signal {-result.returncode}" if result.returncode < 0 else result.returncode
        print(f"{isa} {dtype}: failed ({how}): {result.stderr[-500:]}", flush=True)
        return {"failed": str(how)}
    return json.loads(result.stdout.strip().splitlines()[-1])


def rates_table(rates):
    lines = ["| oneDNN instruction set | " + " | ".join(FLAGS.dtypes) + " |"]
    lines.append("| --- |" + " --- |" * len(FLAGS.dtypes))
    for isa in FLAGS.isas:
        cells = [
            f"{rate:,}" if isinstance(rate, int) else rate
            for rate in (rates[isa][dtype] for dtype in FLAGS.dtypes)
        ]
        lines.append(f"| {isa} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def profiles_table(profiles):
    """Each category's milliseconds per step and share of the step's operation time (two
    operations run at once on two cores, so the operation time exceeds the wall time)."""
    lines = ["| ms per step (share of operation time) | " + " | ".join(FLAGS.dtypes) + " |"]
    lines.append("| --- |" + " --- |" * len(FLAGS.dtypes))
    for name in [*CATEGORIES, "idle", "step (wall)"]:
        cells = []
        for dtype in FLAGS.dtypes:
            profile = profiles[dtype]
            busy = sum(profile[category] for category in CATEGORIES)
            share = f" ({100 * profile[name] / busy:.0f}%)" if name in CATEGORIES else ""
            cells.append(f"{profile[name]:.1f}{share}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv):
    del argv
    subprocess.run(
        [sys.executable, "-m", "pipelines.prepare_data", f"--flagfile={FLAGS.config}"],
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    rates = {}
    for isa in FLAGS.isas:
        rates[isa] = {}
        for dtype in FLAGS.dtypes:
            figures = _measure(dtype, isa)
            if "failed" in figures:
                rates[isa][dtype] = f"failed ({figures['failed']})"
                continue
            rates[isa][dtype] = round(figures["target_tokens_per_sec"])
            print(f"{isa} {dtype}: {rates[isa][dtype]:,} target tokens/s", flush=True)
    profiles = {}
    with tempfile.TemporaryDirectory() as work_dir:
        for dtype in FLAGS.dtypes:
            log_dir = os.path.join(work_dir, dtype)
            figures = _measure(dtype, "default", log_dir)
            if "failed" in figures:
                raise RuntimeError(f"{dtype} training failed ({figures['failed']})")
            profile = profile_by_category(log_dir, figures["seconds"], figures["steps"])
            profile["step (wall)"] = round(1000.0 * figures["seconds"] / figures["steps"], 2)
            profile["target_tokens_per_sec"] = round(figures["target_tokens_per_sec"])
            profiles[dtype] = profile
    cpu = cpu_description()
    print(f"\nCPU: {cpu}. {FLAGS.preset}, {FLAGS.max_tokens}-token batches, {FLAGS.steps} steps.")
    print("\nTarget tokens/s by the instruction sets oneDNN may use:\n" + rates_table(rates))
    print("\nWhere a step's time goes (default instruction set):\n" + profiles_table(profiles))
    print(json.dumps({"cpu": cpu, "rates": rates, "profiles": profiles}))


if __name__ == "__main__":
    app.run(main)
