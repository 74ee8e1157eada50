"""tilemem: memory allocator and liveness analyser for the tiles of Graphcore IPUs.

The API (``tilemem.__all__``, docs/api.md) loads on first use, so that ``tilemem --help``
stays instant::

    import tilemem
    r = tilemem.load("examples/mk1-small.json")
    tilemem.diagnose(r)
"""
from __future__ import annotations

import sys
import types

#: The public names. Removing one is a breaking change: move it to ``_DEPRECATED`` first
#: (``tests/test_api.py`` fails on a name that leaves without a deprecation).
__all__ = ["load", "Report", "liveness", "check", "diagnose", "what_if", "diff", "allocate",
           "report", "plot", "ReportError", "Progress", "Liveness", "Check", "Figures",
           "Diagnosis", "WhatIf", "Diff", "Allocation", "split", "Split", "Packing", "Output",
           "Detail", "Edits", "Levers", "ReportSource", "configure", "Config", "ConfigQuery"]

#: Names that left ``__all__``: name -> (what to use instead, the version that removes it).
_DEPRECATED: dict[str, tuple[str, str]] = {}


def __getattr__(name: str):
    if name == "plot":
        import tilemem.plot   # a subpackage: imported, it is the attribute from then on

        return tilemem.plot
    if name in __all__ or name in _DEPRECATED:
        from . import api

        if name in _DEPRECATED:
            import warnings

            instead, until = _DEPRECATED[name]
            warnings.warn(f"tilemem.{name} is deprecated (removed in {until}): use {instead}",
                          DeprecationWarning, stacklevel=2)
        return getattr(api, name)
    raise AttributeError(f"module 'tilemem' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))


class _Package(types.ModuleType):
    """The package, whose public names win over its stage modules of the same names.

    ``import tilemem.load`` (as every stage does, relatively) binds the module to the
    package's attribute ``load``; ``tilemem.load``, ``tilemem.check`` and ``tilemem.liveness``
    are the API's functions instead, so that binding is not made. The stages stay what
    imports give: ``from tilemem.load import load_report``, ``sys.modules["tilemem.load"]``.
    """

    def __setattr__(self, name, value):
        if isinstance(value, types.ModuleType) and name in __all__ and name != "plot":
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
