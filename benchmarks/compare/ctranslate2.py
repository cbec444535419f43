"""Distilled ConvS2S students against their teacher and against a small Transformer on
CTranslate2 (what a user picking a fast CPU translator would use instead), trained on the
teacher's data and on the same distilled data. One machine, one run.

    python -m benchmarks.compare.ctranslate2 [--work_dir=runs/compare_ctranslate2] \\
        [--teacher_config=configs/multi30k_en_de.cfg] \\
        [--student_config=configs/student_multi30k.cfg] [--teacher_seeds=1,2] \\
        [--train_minutes=58]

Needs the `benchmark` extra; about 8 hours on 2 cores with the defaults (every teacher,
student and Transformer trains for --train_minutes), alone on the machine. Stages, each
kept in --work_dir (a re-run continues): teachers (`pipelines.train` per seed); the distilled
data of the first and of the ensemble (`pipelines.distill`); --pilots, --pilot_minutes
each; students of --student_config with the preset of the pilot fastest at batch 1
within --tolerance of the best pilot's validation BLEU, each searching with the narrowest
of --beams within --tolerance (its export's default), pilots and students evaluated and
exported with --student_flags (a shortlist); Transformers of both data
(`benchmarks.compare.transformer`: CTranslate2 float32 and int8, beam 5 and greedy).
Every translator then runs in a fresh process on the test split (`Comparison.measured`),
beside a process that only imports TensorFlow. Prints the tables and the goals' ratios,
naming the CPU, then one JSON line.
"""

import time

_START = time.perf_counter()

import itertools  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402

from absl import flags  # noqa: E402

from benchmarks import (  # noqa: E402
    ROOT,
    TestSplit,
    child_command,
    cpu_description,
    define_child_flags,
    directory_bytes,
    export_seconds,
    last_json,
    main,
    read_lines,
    run_prepared_data,
    run_python,
    run_timed,
    stage_json,
)
from benchmarks.compare import transformer  # noqa: E402
from benchmarks.compare.distillation_stages import (  # noqa: E402
    budget_flags,
    build_shortlist,
    choose_search,
    distill,
    fastest_pilot,
    recipe_tag,
    train,
)
from benchmarks.translate_speed import time_export  # noqa: E402

DEFAULT_PILOTS = ["multi30k_student_d1", "multi30k_student_d2", "multi30k_student_d1_wide"]
# The teacher's exports: name -> pipelines.export flags.
TEACHER_EXPORTS = {
    "teacher": [],
    "teacher_bfloat16": ["--inference_dtype=bfloat16"],
    "teacher_float32_shortlist": ["--shortlist"],
    "teacher_bfloat16_shortlist": ["--inference_dtype=bfloat16", "--shortlist"],
    "teacher_int8": ["--int8_weights"],
    "teacher_int8_shortlist": ["--int8_weights", "--shortlist"],
}
# A table's columns: (heading, key of the figures, format).
_COLUMNS = (
    ("BLEU", "bleu", "{:.2f}"),
    ("BLEU lc intl", "bleu_lowercase_intl", "{:.2f}"),
    ("batch 1 ms (warm)", "batch1", "{}"),
    ("batch {batch} sent/s", "batch_sentences_per_sec", "{:.1f}"),
    ("peak RSS MiB", "peak_rss_mb", "{:,.0f}"),
    ("disk MiB", "size_mb", "{:.1f}"),
)
_IMPORT_ONLY = "import tensorflow, tensorflow_text, benchmarks\nprint(benchmarks.peak_rss_mb())"


def define_flags(flag_values=flags.FLAGS):
    define = {"flag_values": flag_values}
    configs = os.path.join(ROOT, "configs")
    work_dir = os.path.join(ROOT, "runs", "compare_ctranslate2")
    flags.DEFINE_string("work_dir", work_dir, "Where everything goes.", **define)
    teacher = os.path.join(configs, "multi30k_en_de.cfg")
    flags.DEFINE_string("teacher_config", teacher, "The teachers' flagfile.", **define)
    student = os.path.join(configs, "student_multi30k.cfg")
    flags.DEFINE_string("student_config", student, "The students' flagfile.", **define)
    flags.DEFINE_list("teacher_seeds", ["1", "2"], "The teachers' seeds.", **define)
    exports = list(TEACHER_EXPORTS)
    flags.DEFINE_multi_enum("teacher_exports", exports, exports, "The teacher's exports.", **define)
    flags.DEFINE_list("pilots", DEFAULT_PILOTS, "Presets of the pilots ('': none).", **define)
    flags.DEFINE_float("pilot_minutes", 15.0, "Each pilot's training budget.", **define)
    flags.DEFINE_list("beams", ["1", "2", "5"], "Searches a student chooses from.", **define)
    flags.DEFINE_float("tolerance", 0.3, "Validation BLEU a narrower beam may lose.", **define)
    flags.DEFINE_list("student_flags", ["--shortlist"], "Students' search flags.", **define)
    flags.DEFINE_float(
        "train_minutes",
        58.0,
        "Each teacher's, student's and Transformer's training budget.",
        **define,
    )
    flags.DEFINE_integer("max_epochs", 0, "Transformers' most epochs (0: budget).", **define)
    flags.DEFINE_integer("sentences", 0, "Translate only the first N test sentences.", **define)
    flags.DEFINE_integer("latency_sentences", 100, "Sentences sent one at a time.", **define)
    flags.DEFINE_integer("batch_size", 128, "Sentences per batched request.", **define)
    flags.DEFINE_list("export_flags", [], "More pipelines.export flags, every export.", **define)
    threads = os.cpu_count() or 1
    flags.DEFINE_integer("threads", threads, "Threads of fairseq and CTranslate2.", **define)
    # A fresh CTranslate2 process (what stage 6 runs for each CTranslate2 translator).
    flags.DEFINE_string("child_model", None, "Time this CTranslate2 model here.", **define)
    types = transformer.QUANTIZATIONS
    flags.DEFINE_enum("compute_type", "float32", types, "Its compute type.", **define)
    flags.DEFINE_integer("child_beam", 5, "Its beam.", **define)
    flags.DEFINE_string("sentencepiece_model", None, "Its pieces' model.", **define)
    define_child_flags(flag_values)


def table(results, batch_size):
    """Translators' figures as a Markdown table."""
    header = ["translator", *(label.format(batch=batch_size) for label, _, _ in _COLUMNS)]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for name, figures in results.items():
        batch1 = f"{figures['batch1_mean_ms']:.2f} ({figures['batch1_warm_mean_ms']:.2f})"
        figures = dict(figures, batch1=batch1)
        lines.append(
            f"| {name} | " + " | ".join(f.format(figures[k]) for _, k, f in _COLUMNS) + " |"
        )
    return "\n".join(lines)


def goals(results, student_row, baseline, tolerance):
    """The goals' ratios: the student against each rival (the Transformer student at its
    fastest row at batch 1 within `tolerance` BLEU of its best)."""
    ours = results[student_row]

    def against(row):
        theirs, speed = results[row], "batch_sentences_per_sec"
        ratios = dict(batch1_ms_ratio=ours["batch1_mean_ms"] / theirs["batch1_mean_ms"])
        ratios.update(batch_speed_ratio=ours[speed] / theirs[speed])
        difference = round(ours["bleu"] - theirs["bleu"], 2)
        return dict(
            {k: round(v, 3) for k, v in ratios.items()}, against=row, bleu_difference=difference
        )

    rivals = {name: f for name, f in results.items() if name.startswith("transformer_student_")}
    fastest = fastest_pilot(rivals, tolerance)
    return {
        "student": student_row,
        "transformer": against("transformer_ct2_float32_beam5"),
        "transformer_student": against(fastest),
        "teacher": against("teacher_beam5"),
        "peak_rss_to_import_only": round(ours["peak_rss_mb"] / baseline["peak_rss_mb"], 3),
    }


class Comparison:
    """The stages of one comparison (`options`: this module's flags) in --work_dir."""

    def __init__(self, options):
        self.options, self.work = options, options.work_dir
        # The students' search flags and the name their rows carry.
        self.recipe, self.tag = options.student_flags, recipe_tag(options.student_flags)

    def path(self, *parts):
        return os.path.join(self.work, *parts)

    def teachers_and_data(self):
        """Stages 1 and 2: the teacher runs and {student name: its data's flagfile}."""
        config = self.options.teacher_config
        budget = budget_flags(self.options.train_minutes)
        teachers = [
            train(
                self.path(f"teacher_seed{seed}"), f"--flagfile={config}", f"--seed={seed}", *budget
            )
            for seed in self.options.teacher_seeds
        ]
        data = {"student": distill(teachers[:1], config, self.path("distilled"))}
        if len(teachers) > 1:
            data["student_ensemble"] = distill(teachers, config, self.path("distilled_ensemble"))
        return teachers, data

    def splits(self, prepared):
        """The validation and test splits (their batches sorted by characters)."""
        splits = {}
        for split, limit in (("validation", 0), ("test", self.options.sentences)):
            os.makedirs(self.path(split), exist_ok=True)
            settings = (limit, self.options.latency_sentences, len, split)
            splits[split] = TestSplit(prepared, self.path(split), *settings)
        return splits

    def student(self, name, data_flagfile, *flags_, minutes=None):
        """Stage 3 or 4: a student trained for `minutes` (None: --train_minutes), its search
        chosen; (run, search)."""
        options = self.options
        config, data = f"--flagfile={options.student_config}", f"--flagfile={data_flagfile}"
        budget = budget_flags(minutes or options.train_minutes)
        model_dir = train(self.path(name), config, data, *flags_, *budget)
        return model_dir, choose_search(model_dir, self.recipe, options.beams, options.tolerance)

    def pilot(self, preset, data_flagfile, validation):
        """Stage 3: one pilot ("config": the student config's own model)."""
        chosen = [] if preset == "config" else [f"--preset={preset}"]
        minutes = self.options.pilot_minutes
        model_dir, search = self.student(
            f"pilots/{preset}", data_flagfile, *chosen, minutes=minutes
        )
        name, beam = f"pilot_{preset}{self.tag}", search["beam"]
        figures = self.export_measured(name, model_dir, beam, validation, *self.recipe)
        return dict(figures, search=search)

    def student_rows(self, name, data_flagfile, preset_flags, split, results):
        """Stages 3-4 and their measurements: a student trained and its search chosen
        (returned), its rows added to `results`: its chosen search (the first student's
        also at beam 5) with the recipe (--student_flags), in float32 and with int8
        products (AVX-512 VNNI here); the first student's also without the recipe."""
        model_dir, search = self.student(name, data_flagfile, *preset_flags)
        recipe, tag, measure, chosen = self.recipe, self.tag, self.export_measured, search["beam"]
        for beam in sorted({chosen, 5} if name == "student" else {chosen}):
            results[f"{name}{tag}_beam{beam}"] = measure(
                name + tag, model_dir, beam, split, *recipe
            )
        int8 = measure(f"{name}_int8{tag}", model_dir, chosen, split, "--int8_weights", *recipe)
        results[f"{name}_int8{tag}_beam{chosen}"] = int8
        if tag and name == "student":
            results[f"{name}_beam{chosen}"] = measure(name, model_dir, chosen, split)
        return search

    def measured(self, name, split, time_it, model_path):
        """Stage 6 for one translator: the fresh process `time_it(output, split)` times (the
        first --latency_sentences requests of one sentence, then warm; batches of
        --batch_size sorted by length; peak memory), BLEU (also lowercased `intl`), chrF
        and size on disk."""

        def measure():
            output = self.path("translations", name + ".txt")
            os.makedirs(os.path.dirname(output), exist_ok=True)
            figures = time_it(output, split)
            figures.update(split.scores(read_lines(output)))
            figures["size_mb"] = round(directory_bytes(model_path) / 2**20, 1)
            return figures

        figures = stage_json(self.path("results", name + ".json"), measure)
        print(f"{name}: {json.dumps(figures)}", flush=True)
        return figures

    def export_measured(self, name, model_dir, beam, split, *export_flags):
        """`measured` of the export of `model_dir` with search `beam` (`NAME_beamB`)."""
        row, base = f"{name}_beam{beam}", self.path("exports", f"{name}_beam{beam}")
        if not os.path.isdir(base):
            export_flags += (f"--beam_size={beam}", *self.options.export_flags)
            export_seconds(model_dir, base, *export_flags)
        version = os.path.join(base, max((e for e in os.listdir(base) if e.isdigit()), key=int))
        batch = self.options.batch_size
        time_it = lambda output, split: time_export(version, split, output, batch)  # noqa: E731
        return self.measured(row, split, time_it, version)

    def teacher_exports(self, teacher, split):
        """The first teacher's exports of --teacher_exports, measured (beam 5)."""
        names = self.options.teacher_exports
        if any("--shortlist" in TEACHER_EXPORTS[name] for name in names):
            build_shortlist(teacher)
        measure = self.export_measured
        return {f"{n}_beam5": measure(n, teacher, 5, split, *TEACHER_EXPORTS[n]) for n in names}

    def transformers(self, named_data, split):
        """Stage 5 with its measurements: each Transformer of `named_data` ({name:
        PreparedData}) in CTranslate2's fresh processes; (results, training summaries)."""
        options, results, summaries = self.options, {}, {}
        seed = int(options.teacher_seeds[0])  # the first teacher's
        settings = (options.train_minutes, seed, options.threads, options.max_epochs)
        for name, data in named_data.items():
            checkpoint, data_bin, summary = transformer.train(data, self.path(name), *settings)
            summaries[name] = summary
            languages = (data.source_lang, data.target_lang)
            converted = transformer.convert(checkpoint, data_bin, languages, self.path(name))
            for (quantization, model), beam in itertools.product(converted.items(), (5, 1)):
                flags_ = [f"--child_model={model}", f"--compute_type={quantization}"]
                flags_ += [f"--child_beam={beam}", f"--threads={options.threads}"]
                flags_.append(f"--sentencepiece_model={data.sentencepiece_model_path}")
                row = f"{name}_ct2_{quantization}_" + ("greedy" if beam == 1 else f"beam{beam}")
                results[row] = self.measured(row, split, self.child_timer(flags_), model)
        return results, summaries

    def child_timer(self, flags_):
        """Times a fresh process of this module with the child flags `flags_`."""
        batch_size, module = self.options.batch_size, "benchmarks.compare.ctranslate2"

        def time_it(output, split):
            command = child_command(module, split, output, batch_size, *flags_)
            return last_json(run_timed(command)[1])

        return time_it


def run(options):
    """The benchmark with parsed `options` (this module's flags)."""
    from convs2s_tf.data.data_directory import PreparedData

    if options.child_model:
        print(json.dumps(transformer.child(options, _START)))
        return
    comparison, cpu = Comparison(options), cpu_description()
    teachers, data = comparison.teachers_and_data()
    prepared = run_prepared_data(teachers[0])
    splits = comparison.splits(prepared)
    pilots = {
        p: comparison.pilot(p, data["student"], splits["validation"]) for p in options.pilots if p
    }
    # The students' shape: the pilot fastest at batch 1 within --tolerance of the best.
    preset = fastest_pilot(pilots, options.tolerance) if pilots else "config"
    if pilots:
        print("Pilots, validation split:\n" + table(pilots, options.batch_size), flush=True)
        print(f"Students' preset: {preset}", flush=True)
    chosen = [] if preset == "config" else [f"--preset={preset}"]
    test, searches = splits["test"], {}
    results = comparison.teacher_exports(teachers[0], test)
    for name, flagfile in data.items():
        searches[name] = comparison.student_rows(name, flagfile, chosen, test, results)
    distilled = PreparedData.load(os.path.dirname(os.path.dirname(data["student"])))
    rivals = {"transformer": prepared, "transformer_student": distilled}
    transformers, summaries = comparison.transformers(rivals, test)
    results.update(transformers)
    path = comparison.path("results", "import_only.json")
    baseline = stage_json(
        path, lambda: {"peak_rss_mb": last_json(run_python("-c", _IMPORT_ONLY)[1])}
    )
    beam = searches["student"]["beam"]
    tag = comparison.tag
    reached = goals(results, f"student{tag}_beam{beam}", baseline, options.tolerance)
    reached["int8"] = goals(results, f"student_int8{tag}_beam{beam}", baseline, options.tolerance)
    print(
        f"CPU: {cpu}. Test split; batch 1: the first {options.latency_sentences} requests "
        f"of a fresh process (then warm); batch {options.batch_size}: sorted by length, the "
        f"first pass. A process importing TensorFlow: {baseline['peak_rss_mb']:,.0f} MiB."
    )
    print(table(results, options.batch_size) + f"\nGoals: {json.dumps(reached)}")
    line = {"cpu": cpu, "pilots": pilots, "preset": preset, "searches": searches}
    line["transformers"] = summaries
    print(json.dumps(dict(line, translators=results, import_only=baseline, goals=reached)))


if __name__ == "__main__":
    main(define_flags, run)
