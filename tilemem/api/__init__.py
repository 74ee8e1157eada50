"""The public API: ``import tilemem``, then ``tilemem.load``, ``tilemem.liveness``, ...

One function a question, over one data type (``Report``), each answer an object with its table
(``to_frame()`` / ``to_arrow()``), its JSON (``to_json()``, the CLI's document) and its view in
a notebook (``_repr_html_``, the CLI's view). The CLI is a thin layer over these functions.
The names are re-exported by ``tilemem`` (``tilemem.__all__``); docs/api.md lists them.
"""
from __future__ import annotations

from ..errors import ReportError
from .allocation import Allocation, Progress, allocate
from .configure import Config, ConfigQuery, configure
from .answers import Check, Diff, Figures, Liveness, check, diff, liveness, report
from .loading import Report, load
from .pipeline import Split, split
from .program import Diagnosis, WhatIf, diagnose, what_if

__all__ = ["load", "Report", "liveness", "check", "diagnose", "what_if", "diff", "allocate",
           "report", "ReportError", "Progress", "Liveness", "Check", "Figures", "Diagnosis",
           "WhatIf", "Diff", "Allocation", "split", "Split", "configure", "Config",
           "ConfigQuery"]
