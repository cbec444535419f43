"""The commands of README.md and docs/*.md run, and their links lead somewhere.

Every fenced `bash` or `python` block carries a marker on the line before its fence
(docs/extending.md): `<!-- runnable -->`, `<!-- runnable: background -->` (a server,
started and awaited until it prints a line, stopped after the page),
`<!-- tested-by: tests/PATH.py -->` (run, with smaller flags, by that test module, which
must name or import every `python -m MODULE` of the block) or `<!-- not-runnable: REASON -->`.
The runnable blocks run verbatim, page by page, in a scratch directory laid out like the
repository, where `configs/*.cfg` are tiny versions of the real ones (a small local
corpus, a tiny model, a few training steps), so that a command stays the text a user
copies. The README runs first; every docs page then runs in its own copy of its
directory, two pages at a time.
"""

import concurrent.futures
import dataclasses
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest
from absl import flags
from helpers.corpora import (
    POSENET_TINY_FLAGS,
    TINY_MODEL_FLAGS,
    local_corpus_flags,
    multi30k_lines,
)
from helpers.python_forkserver import SHIM, ForkServer
from helpers.subprocesses import ROOT, free_ports, subprocess_env

DOC_PATHS = ["README.md"] + sorted(
    os.path.join("docs", name)
    for name in os.listdir(os.path.join(ROOT, "docs"))
    if name.endswith(".md")
)
# Fenced blocks in these languages hold commands: each must be marked.
COMMAND_LANGUAGES = ("bash", "sh", "shell", "console", "python")
MARKER = re.compile(
    r"^<!--\s*(runnable(?::\s*(background))?|not-runnable:\s*(.*?)|tested-by:\s*(.*?))\s*-->\s*$"
)
# The modules a block runs (`python -m MODULE`), which a tested-by module must name.
PYTHON_MODULE = re.compile(r"\bpython3? -m ([\w.]+)")
FENCE = re.compile(r"^```\s*(\S*)\s*$")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
# The docs' gRPC and REST ports, replaced by free ones.
DOCS_PORTS = re.compile(r"(?<=[:=/])(8500|8501)\b")
BLOCK_TIMEOUT = 300
SERVER_START_TIMEOUT = 180
# Sentences of source.en and reference.de in the scratch directory.
SAMPLE_SENTENCES = 5


@dataclasses.dataclass
class Block:
    path: str
    line: int  # of the opening fence, 1-based
    language: str
    text: str
    marker: str | None  # "runnable", "background", "not-runnable", "tested-by", or None
    reason: str = ""  # not-runnable's reason, or tested-by's test module

    @property
    def runnable(self):
        return self.marker in ("runnable", "background")

    def __str__(self):
        return f"{self.path}:{self.line}"


def read_blocks(path):
    """The fenced blocks of the markdown file `path` (relative to the repository)."""
    lines = open(os.path.join(ROOT, path), encoding="utf-8").read().splitlines()
    blocks, index = [], 0
    while index < len(lines):
        match = FENCE.match(lines[index])
        if not match:
            index += 1
            continue
        start, body = index, []
        index += 1
        while index < len(lines) and not lines[index].startswith("```"):
            body.append(lines[index])
            index += 1
        marker, reason = None, ""
        found = MARKER.match(lines[start - 1]) if start else None
        if found:
            marker = "background" if found.group(2) else found.group(1).split(":")[0]
            reason = (found.group(3) or found.group(4) or "").strip()
        blocks.append(
            Block(path, start + 1, match.group(1), "\n".join(body) + "\n", marker, reason)
        )
        index += 1
    return blocks


ALL_BLOCKS = [block for path in DOC_PATHS for block in read_blocks(path)]


def test_every_command_block_is_marked():
    problems = []
    for block in ALL_BLOCKS:
        if not block.language:
            problems.append(f"{block}: a fence without a language (use ```text for output)")
        elif block.language in COMMAND_LANGUAGES and block.marker is None:
            problems.append(f"{block}: ```{block.language} block without a runnable marker")
        elif block.marker == "not-runnable" and not block.reason:
            problems.append(f"{block}: not-runnable without a reason")
        elif block.marker == "tested-by" and not block.reason:
            problems.append(f"{block}: tested-by without a test module")
        elif block.marker and block.language not in COMMAND_LANGUAGES:
            problems.append(f"{block}: a marker on a ```{block.language} block, which never runs")
    assert not problems, "\n".join(problems)


def test_tested_by_blocks_name_test_modules_that_run_their_commands():
    # The test module must exist and name each module the block runs, so that the link
    # breaks when either side is renamed or the test stops running the command.
    problems = []
    for block in ALL_BLOCKS:
        if block.marker != "tested-by" or not block.reason:
            continue
        path = os.path.join(ROOT, block.reason)
        if not (block.reason.startswith("tests/") and block.reason.endswith(".py")):
            problems.append(f"{block}: tested-by {block.reason}: not a tests/*.py module")
            continue
        if not os.path.isfile(path):
            problems.append(f"{block}: tested-by {block.reason}, which does not exist")
            continue
        source = open(path, encoding="utf-8").read()
        modules = PYTHON_MODULE.findall(block.text)
        if not modules:
            problems.append(f"{block}: tested-by, but the block runs no `python -m MODULE`")
        for module in modules:
            if not _names_module(source, module):
                problems.append(f"{block}: {block.reason} does not run {module}")
    assert not problems, "\n".join(problems)


def _names_module(source, module):
    """Whether a test module's `source` runs `module`: names it as a string (a subprocess)
    or imports it (in process)."""
    package, _, name = module.rpartition(".")
    imported = (
        rf"^\s*(from {re.escape(package)} import [^\n]*\b{name}\b"
        rf"|import {re.escape(module)}\b)"
    )
    return f'"{module}"' in source or re.search(imported, source, re.MULTILINE) is not None


def test_markers_precede_fences():
    # A marker separated from its fence (a blank line, a sentence) would mark nothing.
    problems = []
    for path in DOC_PATHS:
        lines = open(os.path.join(ROOT, path), encoding="utf-8").read().splitlines()
        for number, line in enumerate(lines, 1):
            following = lines[number] if number < len(lines) else ""
            if MARKER.match(line) and not FENCE.match(following):
                problems.append(f"{path}:{number}: a marker not followed by a fence")
    assert not problems, "\n".join(problems)


def test_relative_links_point_to_files():
    problems = []
    for path in DOC_PATHS:
        text = open(os.path.join(ROOT, path), encoding="utf-8").read()
        for target in LINK.findall(text):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):
                problems.append(f"{path}: {target}: the docs link only within the repository")
                continue
            target = target.split("#", 1)[0]
            if target and not os.path.exists(os.path.join(ROOT, os.path.dirname(path), target)):
                problems.append(f"{path}: {target} does not exist")
    assert not problems, "\n".join(problems)


def test_every_docs_page_is_linked_from_the_readme():
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    linked = set(LINK.findall(readme))
    assert not [path for path in DOC_PATHS[1:] if path not in linked]


@pytest.mark.parametrize("config", sorted(os.listdir(os.path.join(ROOT, "configs"))))
def test_real_configs_name_defined_flags(config, monkeypatch):
    # The commands below run with tiny configs: the real ones are checked here.
    from pipelines import flags as pipeline_flags

    monkeypatch.chdir(ROOT)  # flagfiles name each other relative to the repository
    flag_values = flags.FlagValues()
    pipeline_flags.define_all_flags(flag_values)
    flag_values(["docs", f"--flagfile=configs/{config}"])
    assert flag_values["model_dir"].value.startswith("runs/")


# ---- Running the blocks ----------------------------------------------------------------


def _tiny_configs(corpus):
    """configs/*.cfg of the scratch directory: the real names and run directories over a
    small local corpus, a tiny model and a few training steps."""
    steps = [
        "--max_tokens=600",
        "--max_steps=3",
        "--save_every_steps=1",
        "--valid_beam_size=0",
        "--attention_sentences=0",
        "--sample_sentences=0",
        "--test_beam_size=0",
        "--progress_bar=false",
        "--max_len_a=1.2",
        "--max_len_b=5",
    ]
    data = ["--data_dir=data/multi30k_en_de", *local_corpus_flags(corpus)]
    default = [*data, "--model_dir=runs/multi30k_en_de", *TINY_MODEL_FLAGS, *steps]
    quickstart = [
        "--flagfile=configs/multi30k_en_de.cfg",
        "--model_dir=runs/quickstart",
        "--dropout=0.2",
        "--lr_patience=0",
        "--max_train_minutes=14.5",
    ]
    posenet = [
        *data,
        "--model_dir=runs/posenet_multi30k",
        *POSENET_TINY_FLAGS,
        *steps,
    ]
    configs = {"multi30k_en_de.cfg": default, "quickstart.cfg": quickstart}
    configs["posenet_multi30k.cfg"] = posenet
    return {name: "\n".join(lines) + "\n" for name, lines in configs.items()}


def _environment(bin_dir):
    env = subprocess_env(KERAS_BACKEND="tensorflow")
    # fairseq's console scripts sit beside this interpreter.
    env["PATH"] = os.pathsep.join([bin_dir, os.path.dirname(sys.executable), env["PATH"]])
    return env


class Server:
    """A background block: started, awaited until it prints a line, stopped later."""

    def __init__(self, block, command, cwd, env):
        self.block = block
        self.process = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.stderr = []
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        self._await_first_line()

    def _drain_stderr(self):
        for line in self.process.stderr:
            self.stderr.append(line)

    def _await_first_line(self):
        lines = []

        def read():
            lines.append(self.process.stdout.readline())
            self.process.stdout.read()  # the rest, so that the pipe never fills

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while not lines and reader.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        if not lines or not lines[0]:
            self.stop()
            raise AssertionError(
                f"{self.block}: the server printed nothing within {SERVER_START_TIMEOUT} s "
                f"(exit {self.process.poll()}):\n{''.join(self.stderr)[-3000:]}"
            )

    def stop(self):
        """Stops the server; returns whether it was still running."""
        running = self.process.poll() is None
        if running:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        return running


@dataclasses.dataclass
class PageResult:
    path: str
    ran: list = dataclasses.field(default_factory=list)
    skipped: list = dataclasses.field(default_factory=list)
    error: str | None = None


def _command_lines(text):
    """A block's lines without blanks and comments (a continued command's lines each)."""
    lines = (line.strip() for line in text.splitlines())
    return {line for line in lines if line and not line.startswith("#")}


class Workspace:
    """Runs pages' blocks; keeps what the README ran, which the pages do not run again."""

    def __init__(self, env, ports):
        self.env = env
        self.ports = ports  # the docs' port -> the free one used for it
        self.readme_ran = set()  # command lines of the README's foreground blocks
        self.readme_servers = {}  # text of a README background block -> its Server

    def command(self, block):
        text = DOCS_PORTS.sub(lambda match: str(self.ports[match.group(1)]), block.text)
        if block.language == "python":
            return [sys.executable, "-c", text]
        return ["bash", "-eo", "pipefail", "-c", text]

    def run_page(self, path, cwd, setup=None):
        result, servers = PageResult(path), []
        try:
            if setup:
                self._run(setup, f"{path} (setup)", ["bash", "-eo", "pipefail", "-c", setup], cwd)
            for block in read_blocks(path):
                if not block.runnable:
                    continue
                if path != "README.md" and (
                    _command_lines(block.text) <= self.readme_ran
                    or block.text in self.readme_servers
                ):
                    # Every command run by the README already, in the state this page's
                    # copy starts from (its servers serve until every page ran).
                    result.skipped.append(str(block))
                    continue
                if block.marker == "background":
                    server = Server(block, self.command(block), cwd, self.env)
                    servers.append(server)
                    if path == "README.md":
                        self.readme_servers[block.text] = server
                else:
                    self._run(block.text, str(block), self.command(block), cwd)
                    if path == "README.md":
                        self.readme_ran |= _command_lines(block.text)
                result.ran.append(str(block))
        except (AssertionError, OSError, subprocess.TimeoutExpired) as error:
            result.error = str(error)
        finally:
            for server in servers:
                if path == "README.md" and server in self.readme_servers.values():
                    continue
                if not server.stop() and result.error is None:
                    result.error = f"{server.block}: the server stopped before the page ended"
        return result

    def _run(self, text, where, command, cwd):
        finished = subprocess.run(
            command,
            cwd=cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=BLOCK_TIMEOUT,
        )
        assert finished.returncode == 0, (
            f"{where} failed (exit {finished.returncode}):\n{text}\n"
            f"stdout:\n{finished.stdout[-2000:]}\nstderr:\n{finished.stderr[-3000:]}"
        )

    def stop_readme_servers(self):
        """Stops the README's servers; returns those that had stopped on their own."""
        return [str(server.block) for server in self.readme_servers.values() if not server.stop()]


# What a page's commands assume besides the README's run and export, made before they run.
PAGE_SETUP = {
    # A fairseq model as fairseq-preprocess and fairseq-train leave it: the README's run.
    "docs/fairseq.md": (
        "python -m pipelines.export_fairseq --model_dir=runs/multi30k_en_de "
        "--output_dir=.fairseq_model >/dev/null\n"
        "mkdir -p checkpoints data-bin\n"
        "mv .fairseq_model/checkpoint_best.pt checkpoints/\n"
        "mv .fairseq_model/dict.en.txt .fairseq_model/dict.de.txt data-bin/\n"
        "rm -r .fairseq_model\n"
    ),
    # The second member of the ensemble, which the page trains in prose only.
    "docs/translation.md": "cp -r runs/multi30k_en_de runs/multi30k_en_de_seed2\n",
}


def _fairseq_missing():
    """Why docs/fairseq.md cannot run here (None if it can); an error under CI."""
    if all(importlib.util.find_spec(name) for name in ("torch", "fairseq")):
        return None
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        raise ImportError("docs/fairseq.md must run in CI: install the parity extra.")
    return "needs PyTorch and fairseq (the parity extra)"


def _cost(path):
    """About how long a page's commands take, counted in processes (a training as two);
    the blocks the README runs for every page are not counted."""
    readme = set().union(*(_command_lines(block.text) for block in read_blocks("README.md")))
    blocks = [b for b in read_blocks(path) if b.runnable and not _command_lines(b.text) <= readme]
    texts = [PAGE_SETUP.get(path, "")] + [block.text for block in blocks]
    return sum(
        len(re.findall(r"\bpython -m |\bfairseq-|pipelines\.train\b", text)) for text in texts
    ) + sum(block.language == "python" for block in blocks)


@pytest.fixture(scope="module")
def page_results(small_corpus, small_prepared, tmp_path_factory):
    """Runs the README's blocks, then every docs page's, two pages at a time; returns
    {path: PageResult} (a page that cannot run here maps to the reason)."""
    scratch = tmp_path_factory.mktemp("docs")
    bin_dir = scratch / "bin"
    bin_dir.mkdir()
    # `python` runs this interpreter (a script rather than a link: a virtualenv's
    # interpreter finds its environment from the path it is started by), its `-m` and
    # `-c` commands forked from a server that has imported TensorFlow (python_shim.py).
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "{SHIM}" "$@"\n')
    (bin_dir / "python").chmod(0o755)
    base = scratch / "repository"
    (base / "configs").mkdir(parents=True)
    for name, text in _tiny_configs(small_corpus).items():
        (base / "configs" / name).write_text(text)
    shutil.copytree(small_prepared.data.data_dir, base / "data" / "multi30k_en_de")
    for name, language in (("source.en", "en"), ("reference.de", "de")):
        lines = multi30k_lines("test_2016_flickr", language, SAMPLE_SENTENCES)
        (base / name).write_text("".join(line + "\n" for line in lines), encoding="utf-8")

    env = _environment(str(bin_dir))
    with ForkServer(env) as fork_server:
        env["PYTHON_FORKSERVER"] = fork_server.path
        results = _run_pages(
            Workspace(env, dict(zip(("8500", "8501"), free_ports(2)))), scratch, base
        )
    return results


def _run_pages(workspace, scratch, base):
    """The README's blocks, then every docs page's, two pages at a time."""
    results = {"README.md": workspace.run_page("README.md", base)}
    pages = [path for path in DOC_PATHS if path != "README.md"]
    if results["README.md"].error:
        results.update({path: "the README's commands failed" for path in pages})
    else:
        fairseq_missing = _fairseq_missing()

        def run(path):
            if path == "docs/fairseq.md" and fairseq_missing:
                return fairseq_missing
            directory = scratch / path.replace("/", "_")
            shutil.copytree(base, directory, symlinks=True)
            return workspace.run_page(path, directory, PAGE_SETUP.get(path))

        # The longest pages first, so that the two workers finish together.
        order = sorted(pages, key=lambda path: -_cost(path))
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            results.update(zip(order, pool.map(run, order)))
    stopped_early = workspace.stop_readme_servers()
    if stopped_early and not results["README.md"].error:
        results["README.md"].error = f"{stopped_early}: stopped before the pages ended"
    return results


@pytest.mark.slow  # every page's commands, minutes: `scripts/run_tests.sh --all` and CI
@pytest.mark.parametrize("path", DOC_PATHS)
def test_runnable_blocks_run(path, page_results):
    result = page_results[path]
    if isinstance(result, str):
        if result.startswith("the README"):
            pytest.fail(result)
        pytest.skip(f"{path} {result}")
    assert result.error is None, result.error
    runnable = [str(b) for b in read_blocks(path) if b.runnable]
    assert sorted(result.ran + result.skipped) == sorted(runnable)
