"""The names the library's docstring examples use without importing them, for
`python3 -m pytest --doctest-modules convs2s_tf` (scripts/run_tests.sh)."""

from typing import Any

import keras
import numpy as np
import pytest
import tensorflow as tf


@pytest.fixture(autouse=True)
def _doctest_globals(doctest_namespace: dict[str, Any]) -> None:
    doctest_namespace.update(tf=tf, keras=keras, np=np)
