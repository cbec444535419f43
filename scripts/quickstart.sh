#!/usr/bin/env bash
# Sets up a fresh clone and runs the main job on the embedded Multi30k English-German
# corpus: prepare the data (SentencePiece BPE), train, export and translate a few
# sentences. Every step is resumable: re-running continues where it stopped.
set -euo pipefail
cd "$(dirname "$0")/.."

CONFIG=${CONFIG:-configs/multi30k_en_de.cfg}
python3 -m pip install --quiet --disable-pip-version-check -e .
export TF_CPP_MIN_LOG_LEVEL=2 KERAS_BACKEND=tensorflow

run_if_present() {
  local module=$1
  shift
  if [ -f "pipelines/${module}.py" ]; then
    python3 -m "pipelines.${module}" "$@"
  else
    echo "pipelines.${module} is not part of this version yet; stopping here."
    exit 0
  fi
}

run_if_present prepare_data --flagfile="$CONFIG"
run_if_present train --flagfile="$CONFIG"
run_if_present export --flagfile="$CONFIG"
printf '%s\n' "A man is riding a bicycle down the street." \
  "Two dogs are playing in the snow." \
  "A little girl in a pink dress is smiling." |
  run_if_present translate --flagfile="$CONFIG"
