#!/usr/bin/env bash
# Sets up a fresh clone for testing and runs the whole test suite (lint included).
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install --quiet --disable-pip-version-check -e ".[test]"

export TF_CPP_MIN_LOG_LEVEL=2 KERAS_BACKEND=tensorflow
python3 -m flake8 convs2s_tf pipelines tests benchmarks
python3 -m black --check convs2s_tf pipelines tests benchmarks setup.py
python3 -m isort --check-only convs2s_tf pipelines tests benchmarks setup.py
python3 -m pytest "$@"
