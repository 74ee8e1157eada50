"""The public API: ``import tilemem``, then ``tilemem.load``, ``tilemem.liveness``, ...

One function a question, over one data type (``Report``), each answer an object with its table
(``to_frame()`` / ``to_arrow()``), its JSON (``to_json()``, the CLI's document) and its view in
a notebook (``_repr_html_``, the CLI's view). The CLI's commands that answer a question are
a thin layer over these functions (docs/api.md's last table says which calls what).
The names are re-exported by ``tilemem`` (``tilemem.__all__``); docs/api.md lists them.

Conventions of the surface (issue 67; ``tilemem.configure`` and any new function follow them):

- A public function takes at most 8 parameters (``tests/test_architecture.py`` checks
  ``allocate``, ``diagnose`` and ``what_if``): the report first, positional; then what the
  question is about (``tiles``, a what-if's ``edits``), positional or keyword; everything
  else keyword-only.
- Settings that belong together are one small frozen dataclass in ``tilemem.api.options``,
  typed, each field documented (``#:``), its defaults what a caller gets by saying nothing:
  ``Packing`` (how the packer runs: method, budget, time limit, workers, seed,
  deterministic, scheduler, ..., and ``echo``, where the run says what it does),
  ``Output`` (the file written and its journal, ``resume``), ``Detail`` (what a
  diagnosis says beyond its verdicts), ``Edits`` (a what-if's data edits). A field whose
  default differs between functions is ``None`` ("the function's"), and the function's own
  default is its signature's default value (``allocate(report, *,
  packing=ALLOCATE)``), which ``None`` fields are filled from (``Packing.over``). No limit
  is ``math.inf``, not ``None``. A path argument that may carry more takes the path or the
  value (``output="x.json"`` or ``output=Output("x.json", resume=True)``).
- One value a concept, reused rather than copied: the memory levers are
  ``tilemem.levers.Levers`` (``what_if(report, levers=Levers(...))``, as ``generate``);
  the plan's knobs ``tilemem.pack.run.plan.Policy`` and the solvers'
  ``tilemem.pack.params.SolverParams`` are fields of ``Packing``; a loaded report's file is
  ``Report.file`` (``tilemem.model.ReportSource``: path, format, size, mtime), which the
  workers and the run read rather than a path handed beside the report.
- A value a user can get wrong is refused in one line (``ReportError``, ``field=`` the CLI
  option that sets it) before any long work; the commands build these values from their
  options and call the API function of their question (docs/architecture.md).
- Every public value is exported from ``tilemem`` (``__all__``) and documented in
  docs/api.md.
"""
from __future__ import annotations

from ..errors import ReportError
from .allocation import Allocation, Progress, allocate
from .configure import Config, ConfigQuery, configure
from .answers import Check, Diff, Figures, Liveness, check, diff, liveness, report
from ..levers import Levers
from ..model import ReportSource
from .loading import Report, load
from .options import Detail, Edits, Output, Packing
from .pipeline import Split, split
from .program import Diagnosis, WhatIf, diagnose, what_if

__all__ = ["load", "Report", "liveness", "check", "diagnose", "what_if", "diff", "allocate",
           "report", "ReportError", "Progress", "Liveness", "Check", "Figures", "Diagnosis",
           "WhatIf", "Diff", "Allocation", "split", "Split", "Packing", "Output", "Detail",
           "Edits", "Levers", "ReportSource", "configure", "Config", "ConfigQuery"]
