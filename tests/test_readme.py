"""Every command the README shows runs as shown: each ``console`` block's ``$ tilemem ...``
lines are run on the bundled example (in a scratch folder, stdout piped: no line wrapped),
must exit 0, and must print the lines the README shows under them, in order: each shown
line whole, or, ending in ``...``, the start of a line whose rest is left out; a line ``...``
stands for lines left out. So the README cannot drift from the code, nor show a fragment of a
line as if it were all of it.

The commands run once each, in README order, in one scratch folder (as a reader who follows
the README runs them: a command reading a file an earlier one writes finds it there), and in
one process: ``tilemem.cli.main``, what the ``tilemem`` script runs, with stdout and stderr
captured (``cli_in_process``), not a fresh interpreter a command. A fresh interpreter a
command, and each command's inputs made again for it, cost the suite more than the commands
themselves (importing tilemem and loading numba's cache each time: some 2 s of CPU even for
``check``); ``python -m tilemem`` as a process of its own is checked where the entry point is
the point (tests/test_cli_help.py, tests/test_piped_text.py)."""
from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from unittest import mock

import pytest

from cli_in_process import run_cli

# one pytest-xdist worker runs the module: its commands run once, in one folder (``ran``)
pytestmark = pytest.mark.xdist_group("readme")

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

def examples() -> list[tuple[str, list[str]]]:
    """``(command, shown lines)`` of every ``$ tilemem`` line of the README's console blocks."""
    out = []
    for block in re.findall(r"```console\n(.*?)```", README.read_text(), re.S):
        for part in re.split(r"^\$ ", block, flags=re.M)[1:]:
            command, *shown = part.rstrip("\n").split("\n")
            out.append((command, shown))
    return out


EXAMPLES = examples()


def test_the_readme_shows_commands():
    assert len(EXAMPLES) >= 8
    assert all(c.startswith("tilemem ") for c, _ in EXAMPLES)


SET_UP = ("pip install -e . && tilemem oom examples/mk1-small.json",
          "pip install -e '.[test]' && python -m pytest -q")


def test_the_readme_is_a_reference():
    """At most 200 lines of at most 160 characters (a table row is one line, so no cell is
    longer), the two set-up commands in the first 30, and CI runs the second as it is shown."""
    lines = README.read_text().splitlines()
    assert len(lines) <= 200
    long = [f"line {i}: {len(x)} characters" for i, x in enumerate(lines, 1) if len(x) > 160]
    assert not long, "\n".join(long)
    head = lines[:30]
    assert all(command in head for command in SET_UP), "the set-up commands, in lines 1-30"
    assert SET_UP[1] in (ROOT / ".ci" / "run").read_text()


def output_of(args: list[str]) -> str | None:
    """The file a command writes (``-o FILE`` / ``--output FILE``), if any."""
    for flag in ("-o", "--output"):
        if flag in args[:-1]:
            return args[args.index(flag) + 1]
    return None


def needed_before(index: int) -> list[int]:
    """The README commands before ``index`` that write a file the command at ``index`` reads
    (and, in turn, what those read), in README order: each test makes its own inputs rather
    than relying on another test having run first in the same folder."""
    args = shlex.split(EXAMPLES[index][0])[1:]
    writers = {output_of(shlex.split(c)[1:]): i for i, (c, _) in enumerate(EXAMPLES[:index])}
    found = set()
    for a in args:
        if a in writers and writers[a] is not None and a != output_of(args):
            found |= {writers[a], *needed_before(writers[a])}
    return sorted(found)


def test_a_command_gets_the_files_earlier_commands_write():
    diff = next(i for i, (c, _) in enumerate(EXAMPLES) if c.startswith("tilemem diff "))
    makes = [EXAMPLES[i][0] for i in needed_before(diff)]
    # the same program generated at two availableMemoryProportions, then compared
    assert len(makes) == 2 and all(m.startswith("tilemem generate --preset mk1 ") for m in makes)
    assert [m.split(" -o ")[-1] for m in makes] == ["amp06.json", "amp10.json"]


def tilemem(command: str) -> tuple[int, list[str]]:
    """``(exit status, output lines)`` of the README's ``tilemem ...`` line ``command`` in
    the current folder; as a file gets the text: no ``COLUMNS``, which would wrap it
    (tilemem.commands.options)."""
    with mock.patch.dict(os.environ):
        os.environ.pop("COLUMNS", None)
        code, out, err = run_cli(shlex.split(command)[1:])
    return code, [x.rstrip() for x in (out + err).splitlines()]


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> list[tuple[int, list[str]]]:
    """Each README command's ``(exit status, output lines)``, in README order, every one
    run once in one scratch folder with the bundled examples beside it."""
    folder = tmp_path_factory.mktemp("readme")
    (folder / "examples").symlink_to(ROOT / "examples")
    here = os.getcwd()
    os.chdir(folder)
    try:
        return [tilemem(command) for command, _ in EXAMPLES]
    finally:
        os.chdir(here)


@pytest.mark.parametrize("index", range(len(EXAMPLES)), ids=[c[:60] for c, _ in EXAMPLES])
def test_readme_command_runs_as_shown(index, ran):
    command, shown = EXAMPLES[index]
    for before in needed_before(index):
        assert ran[before][0] == 0, f"{EXAMPLES[before][0]!r}, which makes this one's input"
    code, lines = ran[index]
    assert code == 0, "\n".join(lines)
    at = 0
    for want in (x.rstrip() for x in shown):
        if want == "...":
            continue
        cut = want.endswith("...")
        want = want.removesuffix("...")
        while at < len(lines) and not (lines[at].startswith(want) if cut else lines[at] == want):
            at += 1
        assert at < len(lines), f"{command!r} did not print {want!r}:\n" + "\n".join(lines)
        at += 1
