"""examples/api.ipynb runs from top to bottom (as CI runs it, with nbclient), uses only the
names of ``tilemem.__all__``, and shows what it says it shows."""
from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

import tilemem

NOTEBOOK = Path(__file__).resolve().parents[1] / "examples" / "api.ipynb"

nbformat = pytest.importorskip("nbformat", reason="running the notebook needs "
                               "pip install 'tilemem[notebook]' (in the test extra)")


def _code(nb) -> list[str]:
    return [c.source for c in nb.cells if c.cell_type == "code"]


def tilemem_names(source: str) -> set[str]:
    """The ``X`` of every ``tilemem.X`` in ``source``.

    >>> sorted(tilemem_names("r = tilemem.load('a')\\ntilemem.plot.tile_map(r, 0)"))
    ['load', 'plot']
    """
    return {n.attr for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name) and n.value.id == "tilemem"}


def test_the_notebook_uses_only_the_public_names():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    used = set().union(*(tilemem_names(s) for s in _code(nb)))
    assert {"load", "diagnose", "liveness", "what_if", "allocate", "check", "plot"} <= used
    assert used <= set(tilemem.__all__), used - set(tilemem.__all__)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), \
        "commit the notebook without outputs (CI makes them)"


def test_the_notebook_runs(monkeypatch):
    pytest.importorskip("nbclient", reason="pip install 'tilemem[notebook]' (in the test extra)")
    pytest.importorskip("ipykernel", reason="pip install 'tilemem[notebook]' (in the test extra)")
    from nbclient import NotebookClient

    nb = nbformat.read(NOTEBOOK, as_version=4)
    # the kernel imports this tilemem (a worktree's, when PYTHONPATH points at it)
    root = str(NOTEBOOK.parents[1])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    outs = {i: c.outputs for i, c in enumerate(nb.cells) if c.cell_type == "code"}
    text = "\n".join(o.get("text", "") for cell in outs.values() for o in cell)
    html = "\n".join(o.get("data", {}).get("text/html", "") for cell in outs.values()
                     for o in cell)
    assert "tiles out of memory" in text and "bytes live at the peak" in text
    assert "tiles out of memory" in html            # the program summary, shown
    assert html.count("<table") >= 3                # the DataFrames
    assert any("image/png" in o.get("data", {}) for cell in outs.values() for o in cell)
