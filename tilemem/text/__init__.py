"""Every text view of tilemem: what the commands print for people, one module per command's data.

The stages return data (``Info``, ``MemoryFigures``, ``MaxLive``, ``Allocation``,
``CheckResult``, ``TileDiagnosis``); the views turn it into text, or into rich tables printed
on the console the caller passes (the commands make it: ``tilemem.commands.options``). Here
too are the JSON documents of ``tilemem liveness`` and ``tilemem alloc`` (typed msgspec
structs, keys in camel case), whose stages return plain results; the other stages' results are
their own JSON. Nothing here imports click: the CLI is the only layer that does.

| module | view |
|---|---|
| ``common`` | ``human_bytes``, ``short``, ``titled``, ``unwrapped_console`` |
| ``info`` | ``tilemem info`` |
| ``profile`` | ``tilemem report``: the memory part of the profile summary |
| ``liveness`` | ``tilemem liveness`` and its JSON |
| ``steps`` | ``tilemem liveness --steps`` |
| ``alloc`` | ``tilemem alloc`` and its JSON |
| ``check`` | ``tilemem check`` |
| ``oom`` | ``tilemem oom`` |
"""
from ..model.names import base_name
from .alloc import MAX_ROWS, AllocationDocument, AllocationSummary, alloc_json, alloc_view
from .check import check_text
from .common import human_bytes, short
from .info import info_view
from .liveness import LivenessDocument, PeakVar, TileLiveness, liveness_json, liveness_view
from .oom import no_oom_text, oom_panel, oom_view
from .profile import DISPLAY_NAMES, GAP_DISPLAY_NAMES, summary_text
from .steps import SOURCE, STEP_ROWS, UNAVAILABLE, binned, steps_json, steps_view

__all__ = ["base_name", "MAX_ROWS", "AllocationDocument", "AllocationSummary",
           "alloc_json", "alloc_view", "check_text", "human_bytes", "short",
           "info_view", "LivenessDocument", "PeakVar", "TileLiveness", "liveness_json",
           "liveness_view", "no_oom_text", "oom_panel", "oom_view", "DISPLAY_NAMES",
           "GAP_DISPLAY_NAMES", "summary_text", "SOURCE", "STEP_ROWS", "UNAVAILABLE", "binned",
           "steps_json", "steps_view"]
