"""The ConvS2S stages of `benchmarks.compare.ctranslate2`, each a fresh process of a
pipeline and each kept on disk, so that a re-run continues: a teacher or student trained
within a budget, a teacher's distilled data, a run's shortlist and a student's search
chosen on validation; and the rules that choose a student's shape and search.
"""

import os

from benchmarks import last_json, run_python, stage_json, training_budget


def train(model_dir, *flags_):
    """`pipelines.train` with `flags_` into `model_dir` (which resumes an interrupted run),
    unless `model_dir.json` records it finished; its console appended to `model_dir.log`."""

    def run_training():
        print(f"training {model_dir}", flush=True)
        arguments = ("-m", "pipelines.train", *flags_, f"--model_dir={model_dir}")
        seconds, stdout, stderr = run_python(*arguments)
        with open(model_dir + ".log", "a", encoding="utf-8") as f:
            f.write(stdout + stderr)
        return {"last_process_seconds": round(seconds)}

    stage_json(model_dir + ".json", run_training)
    return model_dir


def distill(teachers, config, output_dir):
    """`pipelines.distill` of the teacher runs into `output_dir` (which resumes); returns
    the data's flagfile."""
    flagfile = os.path.join(output_dir, "distillation", "data.cfg")
    if not os.path.isfile(flagfile):
        print(f"distilling {output_dir}", flush=True)
        teacher = f"--model_dir={','.join(teachers)}"
        arguments = (f"--flagfile={config}", teacher, f"--output_data_dir={output_dir}")
        run_python("-m", "pipelines.distill", *arguments, "--noprogress_bar")
    return flagfile


def narrowest_beam(scores, tolerance):
    """The narrowest beam whose BLEU (`scores`: {beam: BLEU}) is within `tolerance` of the
    best."""
    return min(int(b) for b, score in scores.items() if score >= max(scores.values()) - tolerance)


def fastest_pilot(pilots, tolerance):
    """The pilot (`pilots`: {preset: figures}) fastest at batch 1 among those whose BLEU is
    within `tolerance` of the best."""
    best = max(figures["bleu"] for figures in pilots.values())
    eligible = [name for name, figures in pilots.items() if figures["bleu"] >= best - tolerance]
    return min(eligible, key=lambda name: pilots[name]["batch1_mean_ms"])


def build_shortlist(run_dir):
    """`pipelines.build_shortlist` of `run_dir`, unless its shortlist exists."""
    from convs2s_tf.shortlist import shortlist_path

    if not os.path.isfile(shortlist_path(run_dir)):
        run_python("-m", "pipelines.build_shortlist", f"--model_dir={run_dir}")


def choose_search(model_dir, recipe, beams, tolerance):
    """A student's search with the flags `recipe`: {"bleu": {beam: validation BLEU}, "beam":
    the narrowest of `beams` within `tolerance` of the best}, kept in `search{TAG}.json`
    (`recipe_tag`)."""
    if "--shortlist" in recipe:
        build_shortlist(model_dir)

    def bleu(beam):
        arguments = (f"--model_dir={model_dir}", "--split=validation", f"--beam_size={beam}")
        evaluate = ("-m", "pipelines.evaluate", *arguments, *recipe, "--json")
        return last_json(run_python(*evaluate)[1])["bleu"]

    def choose():
        scores = {beam: bleu(beam) for beam in beams}
        return {"bleu": scores, "beam": narrowest_beam(scores, tolerance)}

    return stage_json(os.path.join(model_dir, f"search{recipe_tag(recipe)}.json"), choose)


def budget_flags(minutes):
    """`pipelines.train`'s flags for a budget of `minutes` (`benchmarks.training_budget`)."""
    return [f"--{name}={value:g}" for name, value in training_budget(minutes).items()]


def recipe_tag(student_flags):
    """The rows' name for the students' flags: "_shortlist" with --shortlist."""
    return "_shortlist" if "--shortlist" in student_flags else ""
