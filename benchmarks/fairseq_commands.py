"""fairseq's command-line tools as `benchmarks.compare_fairseq` (and
`benchmarks.compare_fairseq_training`) run them, and their output.

Every tool runs as `python -m fairseq_cli.TOOL` (what the `fairseq-TOOL` scripts call),
in the interpreter running the benchmark, on the CPU. `fairseq-generate`'s timer covers
its search calls alone (`task.inference_step`: no loading, batching or printing).
"""

import collections
import os
import re
import subprocess
import sys
import time

# fairseq-generate's summary line (its own timer).
_TRANSLATED = re.compile(
    r"Translated ([\d,]+) sentences \(([\d,]+) tokens\) in [\d.]+s \(([\d.]+) sentences/s"
)
# The detokenised hypothesis lines of fairseq-generate and fairseq-interactive.
_DETOKENIZED = re.compile(r"^D-(\d+)\t[^\t]*\t(.*)$", re.M)

GenerateResult = collections.namedtuple(
    "GenerateResult", ["sentences_per_second", "wall_seconds", "translations"]
)
GenerateResult.__doc__ = """A fairseq-generate run.

Fields:
    sentences_per_second: By fairseq's own timer (its search calls alone).
    wall_seconds: The whole process.
    translations: Detokenised best hypotheses, in corpus order.
"""


class CommandError(RuntimeError):
    """A tool failed or printed something other than expected."""


def run_timed(command, cwd, env=None):
    """Runs `command`; returns `(wall seconds, stdout, stderr)`.

    Raises:
        CommandError: It failed (the end of its standard error in the message).
    """
    start = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise CommandError(
            f"{' '.join(command[:4])} ... failed (exit {result.returncode}):\n"
            f"{result.stderr[-3000:]}"
        )
    return seconds, result.stdout, result.stderr


def fairseq_command(tool, *arguments):
    """`python -m fairseq_cli.TOOL ARGUMENTS...` in this interpreter."""
    return [sys.executable, "-m", f"fairseq_cli.{tool}", *map(str, arguments)]


def search_arguments(search_config):
    """fairseq's generation options for a `SearchConfig` (the same search)."""
    return [
        f"--beam={search_config.beam_size}",
        f"--max-len-a={search_config.max_len_a}",
        f"--max-len-b={search_config.max_len_b}",
        f"--min-len={search_config.min_length}",
        f"--lenpen={search_config.length_penalty}",
        f"--unkpen={search_config.unk_penalty}",
        "--cpu",
    ]


def detokenized_hypotheses(stdout, count):
    """The `D-` lines of fairseq's output as a list in sentence order.

    Raises:
        CommandError: A sentence has no hypothesis.
    """
    found = {int(index): text for index, text in _DETOKENIZED.findall(stdout)}
    missing = [index for index in range(count) if index not in found]
    if missing:
        raise CommandError(
            f"fairseq printed no hypothesis for {len(missing)} of {count} sentences "
            f"(first: {missing[0]})."
        )
    return [found[index] for index in range(count)]


def preprocess(export, pieces_prefixes, destination, cwd, subset="test"):
    """Binarises the pieces files `PREFIX.SRC`/`PREFIX.TGT` of each prefix with the
    exported dictionaries (`export.output_dir/dict.LANG.txt`): subsets `test`, `test1`, ...
    of `destination` (`train`, `train1`, ... with `subset="train"`)."""
    dictionaries = {
        lang: os.path.join(export.output_dir, f"dict.{lang}.txt")
        for lang in (export.source_lang, export.target_lang)
    }
    run_timed(
        fairseq_command(
            "preprocess",
            f"--source-lang={export.source_lang}",
            f"--target-lang={export.target_lang}",
            f"--srcdict={dictionaries[export.source_lang]}",
            f"--tgtdict={dictionaries[export.target_lang]}",
            f"--{subset}pref={','.join(pieces_prefixes)}",
            f"--destdir={destination}",
            "--workers=1",
        ),
        cwd,
    )


def generate(export, data_bin, subset, count, batch_size, search_config, cwd):
    """fairseq-generate on binarised `subset` (`count` sentences), batches of
    `batch_size` sorted by length as fairseq sorts them; returns a `GenerateResult`.

    Raises:
        CommandError: It failed, or translated another number of sentences.
    """
    seconds, stdout, stderr = run_timed(
        fairseq_command(
            "generate",
            data_bin,
            f"--path={export.checkpoint_path}",
            f"--gen-subset={subset}",
            f"--source-lang={export.source_lang}",
            f"--target-lang={export.target_lang}",
            f"--batch-size={batch_size}",
            # Its default (8) drops a last batch that is not a multiple of it.
            "--required-batch-size-multiple=1",
            "--post-process=sentencepiece",
            *search_arguments(search_config),
        ),
        cwd,
    )
    match = _TRANSLATED.search(stderr)
    if not match or int(match.group(1).replace(",", "")) != count:
        raise CommandError(
            f"fairseq-generate did not report {count} translated sentences:\n{stderr[-2000:]}"
        )
    return GenerateResult(float(match.group(3)), seconds, detokenized_hypotheses(stdout, count))


def interactive(export, input_path, count, batch_size, search_config, cwd):
    """fairseq-interactive translating the raw text of `input_path` (`count` lines) with
    the export's SentencePiece model (`--bpe sentencepiece`), `batch_size` sentences at a
    time from a buffer of the whole input (sorted by length within it, as fairseq does);
    returns `(wall seconds, translations)`."""
    seconds, stdout, _ = run_timed(
        fairseq_command(
            "interactive",
            export.output_dir,
            f"--path={export.checkpoint_path}",
            f"--source-lang={export.source_lang}",
            f"--target-lang={export.target_lang}",
            "--bpe=sentencepiece",
            f"--sentencepiece-model={export.sentencepiece_model}",
            f"--batch-size={min(batch_size, count)}",
            f"--buffer-size={max(batch_size, count)}",
            f"--input={input_path}",
            *search_arguments(search_config),
        ),
        cwd,
    )
    return seconds, detokenized_hypotheses(stdout, count)
