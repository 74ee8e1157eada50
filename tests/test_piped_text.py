"""Text piped to a file or a pager is not wrapped: each line of a command's output says a
whole thing, never a fragment of a phrase or a number cut at 80 columns (rich's width when
there is no terminal). On a terminal, the text fits the terminal's width.

Each command's output with stdout not a terminal is compared with the same views printed on
a console 10,000 columns wide (where nothing they print wraps): the lines must be the same,
so none of the piped lines is a piece of a longer one. The piped run has ``COLUMNS=80`` in
its environment, as every child of a Python process that imported readline has (pytest's
workers, a script's subprocess): piped text ignores it.
The oom panels, boxed on a terminal and not in a pipe, are checked against the phrases of
the command's own JSON document instead."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tilemem.cli import cli

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = str(ROOT / "examples" / "mk1-small.json")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture(scope="module")
def other(tmp_path_factory):
    """The README's second compilation of the example's program (availableMemoryProportion
    1.0), for ``tilemem diff``."""
    from tilemem.generate import generate_report
    from tilemem.load import save_report

    path = tmp_path_factory.mktemp("diff") / "amp10.capnp"
    save_report(generate_report("mk1", tiles=32, steps=800, seed=1,
                                available_memory_proportion=1.0), path)
    return str(path)


def run(args: list[str], columns: str | None) -> list[str]:
    res = CliRunner().invoke(cli, args, env={"COLUMNS": columns, "FORCE_COLOR": None,
                                             "TTY_COMPATIBLE": None})
    assert res.exit_code == 0, res.output + repr(res.exception)
    return [line.rstrip() for line in res.stdout.splitlines()]


def run_very_wide(args: list[str], monkeypatch) -> list[str]:
    """``args``' views printed on a console 10,000 columns wide."""
    from rich.console import Console

    from tilemem.commands import options

    with monkeypatch.context() as m:
        m.setattr(options, "console", lambda: Console(highlight=False, width=10_000))
        return run(args, None)


def seconds_blanked(lines: list[str]) -> list[str]:
    """``alloc``'s last column is the seconds each tile took, and its ``time:`` line says
    where the run's went: not the same in two runs."""
    return [re.sub(r"\d+\.\d s\b", "S", line) if line.startswith("time:")
            else re.sub(r"\d+\.\d\d$", "S", line) for line in lines]


COMMANDS = {
    "oom": ["oom", EXAMPLE, "--panels", "0", "--method", "heuristic"],
    "alloc": ["alloc", EXAMPLE, "--method", "heuristic"],
    "check": ["check", EXAMPLE],
    "liveness": ["liveness", EXAMPLE],
    "info": ["info", EXAMPLE],
    "report": ["report", EXAMPLE],
    "diff": ["diff", EXAMPLE, "OTHER"],
    "what-if": ["what-if", EXAMPLE, "--scale", "*/activations=2"],
}


@pytest.mark.parametrize("name", COMMANDS)
def test_piped_lines_are_the_lines_of_a_very_wide_terminal(name, request, monkeypatch):
    args = list(COMMANDS[name])
    if "OTHER" in args:
        args[args.index("OTHER")] = request.getfixturevalue("other")
    piped = seconds_blanked(run(args, "80"))
    wide = seconds_blanked(run_very_wide(args, monkeypatch))
    assert piped == wide
    assert piped


def test_oom_to_a_file_keeps_every_phrase_on_one_line(tmp_path):
    # the command as a user types it, stdout to a file, and the same run's JSON
    out, doc = tmp_path / "out.txt", tmp_path / "oom.json"
    env = {k: v for k, v in os.environ.items()
           if k not in ("COLUMNS", "FORCE_COLOR", "TTY_COMPATIBLE")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    with out.open("w") as f:
        # a panel for each tile out of memory (each one's phrases are checked below)
        subprocess.run([sys.executable, "-m", "tilemem", "oom", EXAMPLE, "--panels", "9", "-o",
                        str(doc)],
                       stdout=f, env=env, cwd=tmp_path, check=True, timeout=600)
    lines = out.read_text().splitlines()
    d = json.loads(doc.read_text())
    assert d["tiles"], "the example has tiles out of memory"
    phrases = [f"tile {t['tile']}: out of memory by {t['excess']:,} B" for t in d["tiles"]]
    for t in d["tiles"]:
        phrases += [t["verdict"], *t["nextSteps"], *t["notes"],
                    f"maximum live bytes {t['maxLiveBytes']:,} B"]
    phrases += d["summary"]["assumptions"]
    for phrase in phrases:
        assert any(phrase in line for line in lines), f"{phrase!r} is not on one line"
    # what 80 columns would have cut
    assert max(len(x) for x in lines) > 80
    # no box padded to the longest line
    assert not any("│" in x or "╭" in x for x in lines)


def test_on_a_terminal_the_text_fits_its_width(tmp_path):
    pty, fcntl, termios, struct = (pytest.importorskip(m) for m in
                                   ("pty", "fcntl", "termios", "struct"))
    width = 70
    env = {k: v for k, v in os.environ.items()
           if k not in ("COLUMNS", "FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR")}
    env.update(TERM="xterm", PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT),
                                                                       env.get("PYTHONPATH")])))
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, width, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "tilemem", "info", EXAMPLE], stdout=child,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env)
    os.close(child)
    chunks = []
    while True:
        try:
            chunk = os.read(main, 1 << 16)
        except OSError:     # EIO: the child has closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(main)
    assert proc.wait(timeout=600) == 0
    lines = [ANSI.sub("", x) for x in b"".join(chunks).decode().splitlines()]
    assert len(lines) > 10
    assert max(len(x) for x in lines) <= width
    # the same text piped: the long line the terminal wrapped is one line there
    piped = run(["info", EXAMPLE], None)
    assert max(len(x) for x in piped) > width


def test_str_of_an_answer_is_the_piped_text():
    # the API's str() is the CLI's view, as a file gets it: not wrapped at any width
    import tilemem

    text = [x.rstrip() for x in str(tilemem.load(EXAMPLE)).splitlines()]
    assert text == run(["info", EXAMPLE], None)
    assert max(len(x) for x in text) > 110    # the notebook's HTML width, where it wrapped
