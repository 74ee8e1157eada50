"""Run the runnable examples in every module's docstrings."""
import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

import tilemem

#: The API's examples read examples/mk1-small.json, as a user in the repository's root would.
ROOT = Path(__file__).resolve().parents[1]

MODULES = sorted(m.name for m in pkgutil.walk_packages(tilemem.__path__, "tilemem.")
                 if not m.name.endswith("__main__"))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name, monkeypatch):
    monkeypatch.chdir(ROOT)
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
