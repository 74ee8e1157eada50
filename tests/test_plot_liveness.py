"""`tilemem plot-liveness`: the drawn curve is the live bytes per step computed here from the
columns, the floor the always-live bytes, the peak where the brute force puts it."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from tilemem.cli import main
from tilemem.load import load_report, save_report
from tilemem.model import Report
from tilemem.plot.liveness import plot_liveness

EXAMPLE = Path(__file__).parents[1] / "examples" / "mk1-small.capnp"


def live_by_step(r, tile):
    """Live bytes at every step 0..last of ``tile``, straight from the columns."""
    rows = np.flatnonzero(r.allocated & (r.tile == tile))
    last = int(r.class_steps[:, 1].max())
    live = np.zeros(last + 1, np.int64)
    for i in rows.tolist():
        s, e = r.class_steps[r.eq_class[i]]
        if r.always_live[i]:
            live += r.size[i]
        else:
            live[s:e] += r.size[i]
    return live


def test_drawn_curve_floor_and_peak_are_the_live_bytes(tmp_path):
    r = load_report(EXAMPLE)
    tile = 2
    fig, p = plot_liveness(r, tile)
    ax = fig.axes[0]
    expected = live_by_step(r, tile)
    by_gid = {a.get_gid(): a for a in ax.patches + ax.lines if a.get_gid()}
    values, edges, _ = by_gid["live"].get_data()
    # every step inside the drawn range holds the brute-force live bytes
    for v, a, b in zip(values.tolist(), edges[:-1].tolist(), edges[1:].tolist()):
        assert set(expected[int(a):int(b)].tolist()) <= {v}
    floor = int(r.size[r.allocated & (r.tile == tile) & r.always_live].sum())
    assert by_gid["alwaysLive"].get_ydata()[0] == floor
    peak = int(np.argmax(expected))
    assert by_gid["peak"].get_xdata()[0] == peak
    assert "equivalenceClassSteps" in ax.get_title(loc="left")
    # the grey curve is the maximum over all tiles
    others = np.max([live_by_step(r, t) for t in range(r.num_tiles)], axis=0)
    mvalues, medges, _ = by_gid["maxOverTiles"].get_data()
    for v, a, b in zip(mvalues.tolist(), medges[:-1].tolist(), medges[1:].tolist()):
        assert set(others[int(a):int(b)].tolist()) <= {v}
    out = tmp_path / "live.png"
    assert main(["plot-liveness", str(EXAMPLE), "--tile", str(tile), "-o", str(out)]) == 0
    assert out.read_bytes().startswith(b"\x89PNG") and out.stat().st_size > 20000


def test_no_timeline_is_an_error_not_a_made_up_curve(tmp_path, capsys):
    r = Report.from_columns(var_id=range(4), tile=[0] * 4, size=[4] * 4, alignment=[4] * 4,
                            offset=[0] * 4, category=["variable"] * 4, eq_class=[0, 1, 2, 3],
                            interference=[[1, 3], [2], [3], []])
    path = tmp_path / "cycle.json"
    save_report(r, path)
    out = tmp_path / "live.png"
    assert main(["plot-liveness", str(path), "--tile", "0", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tilemem: error: {path}: tile 0 has no timeline")
    assert len(err.strip().splitlines()) == 1 and not out.exists()
    assert main(["plot-liveness", str(path), "--tile", "0", "-o", str(tmp_path / "x.gif")]) == 2
