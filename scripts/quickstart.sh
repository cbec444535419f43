#!/usr/bin/env bash
# Sets up a fresh clone and runs the main job on the embedded Multi30k English-German
# corpus: prepare the data (SentencePiece BPE), train, export and translate a few
# sentences. Every step is resumable: re-running continues where it stopped.
# CONFIG=configs/quickstart.cfg bash scripts/quickstart.sh trains for 15 minutes instead.
set -euo pipefail
cd "$(dirname "$0")/.."

CONFIG=${CONFIG:-configs/multi30k_en_de.cfg}
python3 -m pip install --quiet --disable-pip-version-check -e .
# The pipelines keep the console quiet themselves (--verbosity=0 shows everything).
export KERAS_BACKEND=tensorflow

python3 -m pipelines.prepare_data --flagfile="$CONFIG"
python3 -m pipelines.train --flagfile="$CONFIG"
python3 -m pipelines.export --flagfile="$CONFIG"
printf '%s\n' "A man is riding a bicycle down the street." \
  "Two dogs are playing in the snow." \
  "A little girl in a pink dress is smiling." |
  python3 -m pipelines.translate --flagfile="$CONFIG"
