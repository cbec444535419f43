#!/usr/bin/env bash
# Sets up a fresh clone and runs the main job of a config: prepare the data (SentencePiece
# BPE), train, export and translate a few sentences. Every step is resumable: re-running
# continues where it stopped.
#   bash scripts/train_and_export.sh                         # configs/multi30k_en_de.cfg, 1 hour
#   bash scripts/train_and_export.sh configs/quickstart.cfg  # 15 minutes
set -euo pipefail
cd "$(dirname "$0")/.."

CONFIG=${1:-configs/multi30k_en_de.cfg}
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
