"""The library names its own parameters in its errors; the command line names its flags.

An error raised in `convs2s_tf` names a parameter in backticks (`beam_size`, `nbest=3`),
never as a command-line flag (--beam_size): the library defines no flag and is used from
Python too. `pipelines.cli` writes the parameters as flags in the one line a pipeline
prints (`flag_names`), so each user reads their own vocabulary.
"""

import ast
import os
import re

import pytest
from absl import flags

from convs2s_tf.decoding import SearchConfig
from convs2s_tf.inference import InferenceError, Translator, UnsupportedRequestError
from convs2s_tf.inference.ensembles import member_checkpoints
from convs2s_tf.shortlist import ShortlistError, build_shortlist
from pipelines import cli
from pipelines import flags as pipeline_flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _flag_syntax(text):
    """The `--name` flags written in `text` (not `a--b`, nor a lone `--`)."""
    return re.findall(r"(?<![\w-])--[a-z][a-z0-9_]*", text)


def _message_literals(tree):
    """(line, text) of the string literals of every `raise` statement, and of the
    functions that build a message to raise (named `*_error` or `*_message`)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            roots = [node.exc]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.endswith(
            ("_error", "_message")
        ):
            roots = [n.value for n in ast.walk(node) if isinstance(n, ast.Return) and n.value]
        else:
            continue
        for root in roots:
            for child in ast.walk(root):
                if isinstance(child, ast.Constant) and isinstance(child.value, str):
                    yield child.lineno, child.value


def test_no_library_error_names_a_command_line_flag():
    found, checked = [], 0
    for directory, _, files in os.walk(os.path.join(ROOT, "convs2s_tf")):
        for file_name in sorted(files):
            if not file_name.endswith(".py"):
                continue
            path = os.path.join(directory, file_name)
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), path)
            for line, text in _message_literals(tree):
                checked += 1
                if _flag_syntax(text):
                    found.append(f"{os.path.relpath(path, ROOT)}:{line}: {text!r}")
    assert checked > 100  # the walk reads the package's messages
    assert found == []


def test_the_check_finds_flag_syntax_in_a_raise():
    tree = ast.parse(
        "def f(n):\n"
        "    raise ValueError(f'--nbest={n} is too many')\n"
        "def _nbest_error(n):\n"
        "    return f'lower --beam_size (fairseq-style a--b is not a flag)'\n"
    )
    found = [flag for _, text in _message_literals(tree) for flag in _flag_syntax(text)]
    assert sorted(found) == ["--beam_size", "--nbest"]


class _OneBest(Translator):
    max_nbest = 1

    def _translate(self, texts, nbest):
        return [[(text, 0.0)] for text in texts]


def _python_errors():
    """{what: the message a Python caller reads} for errors the command line reaches too."""
    errors = {}
    for name, call in [
        ("beam_size", lambda: SearchConfig(beam_size=0).validate()),
        ("nbest", lambda: SearchConfig(beam_size=5, nbest=6).validate()),
        ("min_length", lambda: SearchConfig(min_length=50, max_len_b=10).validate()),
        ("request", lambda: _OneBest().check_request(nbest=3)),
        ("checkpoints", lambda: member_checkpoints(["runs/a", "runs/b"], "ckpt-1")),
        ("shortlist", lambda: build_shortlist("runs/a", k=2, n=1, source_file="train.en")),
    ]:
        with pytest.raises((ValueError, InferenceError, ShortlistError)) as raised:
            call()
        errors[name] = str(raised.value)
    return errors


def test_python_callers_read_the_parameters_names():
    errors = _python_errors()
    assert errors["beam_size"] == "`beam_size` must be >= 1, got 0."
    assert errors["nbest"] == "`nbest=6` must be between 1 and `beam_size=5`."
    assert errors["min_length"].startswith(
        "`min_length=50` exceeds the maximum output length `max_len_b=10` (with `max_len_a=0`)"
    )
    assert errors["request"] == "`nbest=3` must be between 1 and 1."
    assert errors["checkpoints"].startswith(
        "`checkpoint` names 1 checkpoint(s) for 2 run directories in `model_dir`"
    )
    assert errors["shortlist"] == "Give both `source_file` and `target_file`, or neither."
    for message in errors.values():
        assert "--" not in message, message


@pytest.fixture(scope="module")
def pipeline_flag_values():
    flag_values = flags.FlagValues()
    pipeline_flags.define_all_flags(flag_values)
    return flag_values


def test_the_command_line_reads_the_flags(pipeline_flag_values):
    errors = _python_errors()
    on_the_command_line = {
        name: cli.flag_names(message, pipeline_flag_values) for name, message in errors.items()
    }
    assert on_the_command_line["beam_size"] == "--beam_size must be >= 1, got 0."
    assert on_the_command_line["nbest"] == "--nbest=6 must be between 1 and --beam_size=5."
    assert on_the_command_line["min_length"].startswith(
        "--min_length=50 exceeds the maximum output length --max_len_b=10 (with --max_len_a=0)"
    )
    assert on_the_command_line["checkpoints"].startswith(
        "--checkpoint names 1 checkpoint(s) for 2 run directories in --model_dir"
    )
    # A parameter whose flag has another name (cli.FLAG_ALIASES).
    assert on_the_command_line["shortlist"] == (
        "Give both --shortlist_source and --shortlist_target, or neither."
    )
    for message in on_the_command_line.values():
        assert "`" not in message, message


def test_flag_names_keeps_values_unquotes_them_and_leaves_other_backticks(
    pipeline_flag_values,
):
    def on_the_command_line(message):
        return cli.flag_names(message, pipeline_flag_values)

    assert on_the_command_line("pass `invalid_utf8='replace'` to") == (
        "pass --invalid_utf8=replace to"
    )
    assert on_the_command_line("`dataset='local'` `train_prefix=/path/train`") == (
        "--dataset=local --train_prefix=/path/train"
    )
    assert on_the_command_line("use `attention` and `nbest`") == "use --attention_dir and --nbest"
    # Not flags: left as they are.
    for message in (
        "a `PrepareConfig`'s `split_prefixes`",
        "`pip install torch==2.13.0`",
        "pass `residual`.",
    ):
        assert on_the_command_line(message) == message
    # An alias is used only where its flag is defined.
    assert cli.flag_names("give `source_file`", flags.FlagValues()) == "give `source_file`"


def test_one_line_names_the_flags_the_pipeline_defined(pipeline_flag_values, monkeypatch):
    monkeypatch.setattr(cli, "FLAGS", pipeline_flag_values)
    error = UnsupportedRequestError("`nbest=3` must be between\n  1 and 1.")
    assert cli.one_line(error) == "--nbest=3 must be between 1 and 1."


def test_every_alias_names_a_pipeline_flag(pipeline_flag_values):
    for parameter, flag in cli.FLAG_ALIASES.items():
        assert flag in pipeline_flag_values, parameter
        assert parameter not in pipeline_flag_values, parameter
