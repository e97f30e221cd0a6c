"""The real-code suite (``make realcode``): not collected by ``make test`` (tests/conftest.py leaves this folder
out unless it is named on the command line). Each tree's outcomes are computed once per session."""

import pytest


@pytest.fixture(scope="session")
def emitted_root(tmp_path_factory):
    """Where the command line writes: copies of the installed packages, the emitted modules in them."""
    return tmp_path_factory.mktemp("emitted")
