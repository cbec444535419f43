#!/usr/bin/env bash
# Sets up a fresh clone for testing, lints, and runs the fast tests (`--all`: every test).
set -euo pipefail
cd "$(dirname "$0")/.."

PIP=(python3 -m pip install --quiet --disable-pip-version-check)
# The parity extra (fairseq itself, for tests/test_fairseq_import.py) and the benchmark
# extra (the same and CTranslate2, for tests/test_compare_ctranslate2.py): PyTorch first and on
# its own, pinned to the CPU build, so that pip never resolves a CUDA build for fairseq;
# fairseq-fixed then compiles against it (no build isolation, which would fetch another
# torch) and needs Cython for that.
"${PIP[@]}" torch==2.13.0
"${PIP[@]}" cython wheel "setuptools>=64" numpy
"${PIP[@]}" --no-build-isolation -e ".[test,parity,benchmark]"

export TF_CPP_MIN_LOG_LEVEL=2 KERAS_BACKEND=tensorflow
checks() {
  python3 -m flake8 convs2s_tf pipelines tests benchmarks
  python3 -m black --check convs2s_tf pipelines tests benchmarks setup.py
  python3 -m isort --check-only convs2s_tf pipelines tests benchmarks setup.py
  python3 -m mypy  # the library's types; what it checks is set in pyproject.toml
  lint-imports  # the library's layering and no import cycle (contracts in pyproject.toml)
  # The library's docstring examples (their option flags in pyproject.toml).
  python3 -m pytest -q -p no:cacheprovider --doctest-modules convs2s_tf
}
# The checks (one core's work for about a minute) run beside the tests, which leave a
# core idle whenever they wait on a server or a subprocess; their report follows the tests'.
CHECKS_LOG=$(mktemp)
trap 'rm -f "$CHECKS_LOG"' EXIT
checks >"$CHECKS_LOG" 2>&1 &
CHECKS_PID=$!
# The fast tests by default; `--all` adds those marked `slow` (pipelines, benchmarks and
# every docs page's commands run end to end in fresh processes), as CI runs them.
SELECT=(-m "not slow")
if [[ "${1:-}" == "--all" ]]; then
  SELECT=()
  shift
  # Debian's Chromium and its ChromeDriver, for the slow test of pipelines.serve's page
  # (tests/test_serving_page.py), where they are missing and apt can install them.
  if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    if command -v apt-get >/dev/null && [[ $(id -u) == 0 ]]; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        chromium chromium-driver >/dev/null
    fi
  fi
fi
# Two test processes (TEST_WORKERS=0: one), each running a whole file at a time so that a
# module's fixtures (a trained run, an export) are made once; modules in the order
# tests/conftest.py sets (the long end-to-end ones first).
# One compute thread per TensorFlow (and PyTorch) process: the two workers and the
# processes they start share two cores, and pools sized to every core each make them wait
# on each other (a multi-worker test took three times as long beside another worker).
export TF_NUM_INTRAOP_THREADS="${TF_NUM_INTRAOP_THREADS:-1}" OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
TESTS_STATUS=0
python3 -m pytest -n "${TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder \
  --durations=25 "${SELECT[@]}" "$@" || TESTS_STATUS=$?
CHECKS_STATUS=0
wait "$CHECKS_PID" || CHECKS_STATUS=$?
cat "$CHECKS_LOG"
if ((CHECKS_STATUS)); then
  echo "lint, type or docstring checks failed (exit $CHECKS_STATUS): see above" >&2
fi
((TESTS_STATUS == 0 && CHECKS_STATUS == 0))
