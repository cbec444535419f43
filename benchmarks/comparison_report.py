"""The report of `benchmarks.compare_fairseq`: its header, the table and the JSON summary."""

import os

RATE, TIME = "rate", "time"  # higher is better / lower is better
_CPU_FEATURES = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16")
# (label, this project's measurement, fairseq's, kind); {batch}, {latency} and
# {sentences} are filled in. fairseq's batch rows are fairseq-generate's own timer, its
# whole-process rows fairseq-interactive's wall time.
_ROWS = (
    (
        "in-process float32, batch {batch}, sentences/s (fairseq-generate)",
        "in_process_float32_batch_sentences_per_sec",
        "fairseq_batch_sentences_per_sec",
        RATE,
    ),
    (
        "in-process bfloat16, batch {batch}, sentences/s (fairseq-generate, float32)",
        "in_process_bfloat16_batch_sentences_per_sec",
        "fairseq_batch_sentences_per_sec",
        RATE,
    ),
    (
        "in-process, batch 1, ms/sentence, first {latency} (fairseq-generate)",
        "in_process_float32_batch1_ms",
        "fairseq_batch1_ms",
        TIME,
    ),
    (
        "fresh SavedModel, batch 1, mean of the first {latency} requests, ms",
        "saved_model_batch1_mean_ms",
        "fairseq_batch1_ms",
        TIME,
    ),
    (
        "fresh SavedModel, the same {latency} again (warm), ms",
        "saved_model_batch1_warm_mean_ms",
        "fairseq_batch1_ms",
        TIME,
    ),
    (
        "fresh SavedModel, batch {batch}, first pass, sentences/s",
        "saved_model_batch_sentences_per_sec",
        "fairseq_batch_sentences_per_sec",
        RATE,
    ),
    (
        "float32 floor (matrix products alone), batch 1, ms/sentence, first {latency}",
        "floor_batch1_ms",
        "fairseq_batch1_ms",
        TIME,
    ),
    (
        "float32 floor (matrix products alone), batch {batch}, sentences/s",
        "floor_batch_sentences_per_sec",
        "fairseq_batch_sentences_per_sec",
        RATE,
    ),
    (
        "float32 floor (products and beam selection), batch 1, ms/sentence, first {latency}",
        "floor_selection_batch1_ms",
        "fairseq_batch1_ms",
        TIME,
    ),
    (
        "float32 floor (products and beam selection), batch {batch}, sentences/s",
        "floor_selection_batch_sentences_per_sec",
        "fairseq_batch_sentences_per_sec",
        RATE,
    ),
    (
        "whole process, {sentences} lines, s (translate vs fairseq-interactive)",
        "translate_all_seconds",
        "interactive_all_seconds",
        TIME,
    ),
    (
        "whole process, one sentence, s",
        "translate_one_seconds",
        "interactive_one_seconds",
        TIME,
    ),
    (
        "importing the command-line module, s",
        "import_translate_seconds",
        "import_interactive_seconds",
        TIME,
    ),
)
# Translations compared for identity: (fairseq's or the reference, this project's).
_AGREEMENT = (
    ("fairseq-generate", "in-process float32"),
    ("fairseq-interactive", "pipelines.translate"),
    ("in-process float32", "fresh SavedModel"),
)


def cpu_description():
    """The CPU's model name, core count and the vector/matrix features that matter here
    (from /proc/cpuinfo)."""
    model, features = "unknown CPU", set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    model = value.strip()
                elif key.strip() == "flags":
                    features = set(value.split())
    except OSError:
        pass
    present = " ".join(name for name in _CPU_FEATURES if name in features) or "no AVX2"
    return f"{model}, {os.cpu_count()} logical cores, {present}"


def header(model_dir, export, comparison):
    """What is compared, on what."""
    import torch

    search = comparison.search_config
    lines = [
        f"compare_fairseq: {model_dir} as fairseq {export.architecture} "
        f"({export.checkpoint_path}); {len(comparison.sources)} sentences, beam "
        f"{search.beam_size}, maximum length {search.max_len_a} * source + {search.max_len_b}",
        f"CPU: {cpu_description()}; PyTorch threads: {torch.get_num_threads()}",
        "fairseq's batch figures are fairseq-generate's own timer (its search calls alone); "
        "whole processes are wall times.",
    ]
    load = os.getloadavg()[0]
    # Above one waiting process per core, others compete (this one accounts for one).
    if load > os.cpu_count():
        # PyTorch's OpenMP threads wait for each other and slow down far more than
        # TensorFlow's thread pool when other processes take the cores.
        lines.append(
            f"WARNING: the CPU is busy (load average {load:.1f}); the figures, fairseq's "
            "above all, are not representative."
        )
    return "\n".join(lines)


def _ratio(ours, theirs, kind):
    """> 1 when this project is faster."""
    return theirs / ours if kind == TIME else ours / theirs


def _rows(comparison):
    """(label, ours, fairseq's, ratio) of every row whose two numbers were measured."""
    results = comparison.results
    values = {
        "batch": comparison.batch_size,
        "latency": results["latency_sentences"],
        "sentences": results["sentences"],
    }
    for label, ours, theirs, kind in _ROWS:
        if ours in results and theirs in results:
            ratio = _ratio(results[ours], results[theirs], kind)
            yield label.format(**values), results[ours], results[theirs], ratio, ours


def agreement(comparison):
    """{"A vs B": identical translations} of every compared pair that was translated."""
    counts = {}
    for first, second in _AGREEMENT:
        if first in comparison.translations and second in comparison.translations:
            pairs = zip(comparison.translations[first], comparison.translations[second])
            counts[f"{first} vs {second}"] = sum(a == b for a, b in pairs)
    return counts


def table(comparison):
    """A Markdown table of the rows, the SavedModel's load figures and the agreement."""
    lines = [
        "| | this project | fairseq | ratio (> 1: this project faster) |",
        "| --- | --- | --- | --- |",
    ]
    for label, ours, theirs, ratio, _ in _rows(comparison):
        lines.append(f"| {label} | {ours:,.2f} | {theirs:,.2f} | {ratio:.2f}x |")
    results = comparison.results
    if "saved_model_load_seconds" in results:
        lines.append(
            f"\nFresh SavedModel process: imports {results['saved_model_import_seconds']:.2f} s, "
            f"load {results['saved_model_load_seconds']:.2f} s, first request "
            f"{results['saved_model_first_request_ms']:.1f} ms (export took "
            f"{results['saved_model_export_seconds']:.1f} s)."
        )
    if "floor_peak_gflops" in results:
        lines.append(
            f"float32 floor: {results['floor_mean_steps']:.2f} steps a sentence, one step's "
            f"products {results['floor_step_products_ms_batch1']:.3f} ms at batch 1 "
            f"({results['floor_decoder_weights_mb']:.1f} MB of decoder weights), "
            f"{results['floor_total_gflop']:.1f} GFLOP in all at "
            f"{results['floor_peak_gflops']:.0f} GFLOPS (the fastest rate measured here)."
        )
    if "floor_step_selection_ms_batch1" in results:
        lines.append(
            f"Beam selection (log-softmax over the vocabulary, top 2 x beam): "
            f"{results['floor_step_selection_ms_batch1']:.3f} ms a step at batch 1, "
            f"{results['floor_step_selection_ms_per_sentence_batch']:.4f} ms a sentence "
            f"and step at batch {comparison.batch_size}."
        )
    if results.get("import_interactive_loads_tensorflow"):
        lines.append(
            "fairseq's import includes TensorFlow's here (torch.utils.tensorboard imports it "
            "when it is installed)."
        )
    for pair, count in agreement(comparison).items():
        lines.append(f"Identical translations, {pair}: {count} of {results['sentences']}")
    return "\n".join(lines)


def summary(comparison):
    """The JSON summary: every measurement, each row's ratio, the agreement, the CPU."""
    summary = {"cpu": cpu_description(), "batch_size": comparison.batch_size}
    summary.update(comparison.results)
    for _, _, _, ratio, key in _rows(comparison):
        summary[f"ratio_{key}"] = round(ratio, 2)
    summary.update(
        {
            f"identical_{pair.replace(' ', '_')}": count
            for pair, count in agreement(comparison).items()
        }
    )
    return summary
