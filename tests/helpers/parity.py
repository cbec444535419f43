"""The guard every fairseq parity test module starts with."""

import os

import pytest


def require_fairseq():
    """Skips the calling test module when fairseq or torch cannot be imported.

    Under CI (`CI` set and not false) a missing fairseq is an error instead: the parity
    tests must run there, and `scripts/run_tests.sh` installs them.
    """
    try:
        import fairseq  # noqa: F401
        import torch  # noqa: F401
    except ImportError as error:  # pragma: no cover (depends on the environment)
        if os.environ.get("CI", "").lower() not in ("", "0", "false"):
            raise ImportError(
                "The fairseq parity tests must run in CI, but fairseq/torch cannot be "
                f"imported ({error}); scripts/run_tests.sh installs them (torch==2.13.0, "
                "then -e .[test,parity])."
            ) from error
        pytest.skip(
            f"fairseq parity tests skipped: fairseq/torch not importable ({error}). "
            "Install them as scripts/run_tests.sh does: `pip install torch==2.13.0`, then "
            "`pip install cython` and `pip install --no-build-isolation -e "
            "'.[test,parity]'`.",
            allow_module_level=True,
        )
