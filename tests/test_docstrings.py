"""Runs the `>>>` examples of the library's docstrings, one test per docstring.

Every module of `convs2s_tf` is imported and searched; an example sees its module's
globals plus `tf`, `keras` and `np`, the names the examples use without importing.
"""

import doctest
import importlib
import pkgutil

import keras
import numpy as np
import pytest
import tensorflow as tf

import convs2s_tf

OPTION_FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def library_docstring_tests():
    """The `doctest.DocTest`s with examples of every `convs2s_tf` module, by name."""
    finder = doctest.DocTestFinder()
    tests = []
    modules = pkgutil.walk_packages(convs2s_tf.__path__, prefix="convs2s_tf.")
    for name in sorted(info.name for info in modules):
        tests.extend(test for test in finder.find(importlib.import_module(name)) if test.examples)
    return sorted(tests, key=lambda test: test.name)


@pytest.mark.parametrize("test", library_docstring_tests(), ids=lambda test: test.name)
def test_docstring_examples(test):
    test.globs.update(tf=tf, keras=keras, np=np)
    report = []
    runner = doctest.DocTestRunner(optionflags=OPTION_FLAGS)
    result = runner.run(test, out=report.append)
    assert result.failed == 0, "".join(report)
