"""Live bytes over program steps as a static picture (``tilemem plot-liveness``).

The same data as the Liveness view of the HTML report (``tilemem.liveness.step_profile``):
live bytes per step as a step function (always-live bytes included: they are the floor),
the maximum over tiles in grey when the report has its own program steps, tileMemory, and
the peak step marked. Artists carry gids (``"live"``, ``"maxOverTiles"``, ``"alwaysLive"``,
``"peak"``) so tests read back what was drawn.
"""
from __future__ import annotations

import numpy as np

from ..errors import ReportError
from ..liveness import StepProfile, live_rows_at, max_over_tiles, step_profile
from ..model import Report
from .maps import new_figure, kib_label, power_of_two_locator

SOURCE = {"steps": "program steps from equivalenceClassSteps",
          "points": "program points reconstructed from the interference (an order "
                    "consistent with it, not the program's own steps)"}


def no_timeline_error(tile: int) -> ReportError:
    return ReportError(f"tile {tile} has no timeline: no equivalenceClassSteps and its "
                       "interference has no interval model, so live bytes over program steps "
                       "cannot be drawn", field="equivalenceClassSteps", tile=tile)


def _edges(p_start: np.ndarray) -> np.ndarray:
    """Stairs edges for segments starting at ``p_start`` (the last one drawn one step wide)."""
    return np.r_[p_start, p_start[-1] + 1] if len(p_start) else np.zeros(1)


def plot_liveness(r: Report, tile: int, *, with_max: bool = True):
    """``(figure, profile)``: live bytes of ``tile`` over program steps. Raises
    ``ReportError`` when the tile has no timeline (no curve is invented)."""
    from matplotlib.ticker import FuncFormatter

    p = step_profile(r, tile)
    if p is None:
        raise no_timeline_error(tile)
    tm = r.target.tile_memory
    fig = new_figure(13, 4.8)
    ax = fig.subplots()
    top = max(p.peak_bytes, 1)
    if with_max and p.kind == "steps":
        start, best, _ = max_over_tiles(r)
        if len(start):
            ax.stairs(best, _edges(start), color="#bdbdbd", lw=1.0, baseline=None,
                      label="maximum over tiles", gid="maxOverTiles")
            top = max(top, int(best.max()))
    if len(p.start):
        ax.stairs(p.live_bytes, _edges(p.start), color="#2171b5", lw=1.4, fill=False,
                  baseline=None, label=f"tile {tile}", gid="live")
    ax.axhline(p.always_live_bytes, color="#4d4d4d", lw=1.0, ls="--", gid="alwaysLive",
               label=f"always-live ({p.always_live_bytes:,} B)")
    ax.axhline(tm, color="#b2182b", lw=1.2, label=f"tileMemory ({tm:,} B)")
    unit = "program step" if p.kind == "steps" else "program point"
    if len(p.start):
        lo, hi = p.peak_steps
        ax.axvline(lo, color="#d6604d", lw=1.0, gid="peak")
        ax.plot([lo], [p.peak_bytes], "o", color="#d6604d", ms=5)
        n = len(live_rows_at(r, tile, lo))
        ax.annotate(f"peak {p.peak_bytes:,} B at {unit} {lo:,} ({n:,} variables live)",
                    (lo, p.peak_bytes), xytext=(6, 6), textcoords="offset points", fontsize=8,
                    color="#b2182b")
        ax.set_xlim(p.start[0], p.start[-1] + 1)
    ymax = max(top, tm) * 1.06
    ax.set_ylim(0, ymax)
    ax.yaxis.set_major_locator(power_of_two_locator(ymax))
    ax.yaxis.set_major_formatter(FuncFormatter(kib_label))
    ax.set_xlabel(unit)
    ax.set_ylabel("live bytes")
    ax.set_title(f"tile {tile}: live bytes over {SOURCE[p.kind]}", loc="left", fontsize=10)
    ax.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False, ncol=4)
    return fig, p


__all__ = ["plot_liveness", "StepProfile", "no_timeline_error"]
