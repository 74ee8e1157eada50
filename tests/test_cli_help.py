"""Every command's --help runs, documents every option, and says what the code does: the
commands are discovered from the CLI itself, and the help's claims that can be read off the
code (defaults, choices, the command list) are compared with it."""
from __future__ import annotations

import inspect

import click
import pytest
from click.testing import CliRunner

from tilemem.cli import COMMANDS, LazyGroup, cli
from tilemem.pack.run.driver import allocate
from tilemem.pack.kinds import METHODS, Method

NAMES = LazyGroup.list_commands(cli, None)


def command(name: str) -> click.Command:
    return LazyGroup.get_command(cli, None, name)


def test_the_commands_are_the_ones_the_group_lists():
    assert NAMES == list(COMMANDS) and len(NAMES) >= 10
    out = CliRunner().invoke(cli, ["--help"])
    assert out.exit_code == 0
    for name in NAMES:     # the top-level help lists every command with its line
        assert name in out.output


@pytest.mark.parametrize("name", NAMES)
def test_help_runs_and_documents_every_option(name):
    out = CliRunner().invoke(cli, [name, "--help"])
    assert out.exit_code == 0, out.output
    cmd = command(name)
    assert (cmd.help or "").strip(), f"{name} has no description"
    for p in cmd.params:
        if isinstance(p, click.Option) and p.name != "help":
            assert (p.help or "").strip(), f"{name} {p.opts[0]} has no help text"
            for opt in p.opts:    # the help shows it (a hidden alias, a former spelling, not)
                assert (opt in out.output) != p.hidden


@pytest.mark.parametrize("name", [n for n in NAMES
                                  if any(p.name == "method" for p in command(n).params)])
def test_method_choices_and_default_are_the_packers(name):
    method = next(p for p in command(name).params if p.name == "method")
    assert tuple(method.type.choices) == METHODS == tuple(m.value for m in Method)
    assert method.default == inspect.signature(allocate).parameters["method"].default
    import tilemem

    assert method.default == tilemem.Packing().method   # the API's default too


def _api_function(name):
    """The API function each command that runs the packer calls (its defaults are the
    command's)."""
    import tilemem
    from tilemem.plot import html_page

    return {"alloc": tilemem.allocate, "oom": tilemem.diagnose, "what-if": tilemem.what_if,
            "html": html_page}.get(name)


@pytest.mark.parametrize("name", [n for n in NAMES
                                  if any(p.name == "budget" for p in command(n).params)])
def test_a_command_s_budget_and_time_limit_are_its_api_function_s(name):
    """Each default is stated once (``tilemem.pack.kinds.DEFAULTS``): the command's
    ``--budget`` and ``--time-limit`` defaults are those of the function it calls, and the
    commands share one definition of the options (same type, same ``--method``)."""
    params = {p.name: p for p in command(name).params}
    fn = inspect.signature(_api_function(name)).parameters
    if "packing" in fn:   # the function's defaults: its signature's ``Packing``
        fn = {k: inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY,
                                   default=getattr(fn["packing"].default, k))
              for k in ("budget", "time_limit")}
    assert params["budget"].default == fn["budget"].default > 0
    api_limit = fn["time_limit"].default
    if api_limit is None:   # the policy's (``allocate``: given, it replaces the policy's)
        from tilemem.pack.run.plan import Policy

        api_limit = Policy().time_limit
    assert params["time_limit"].default == api_limit > 0
    alloc = {p.name: p for p in command("alloc").params}
    for option in ("budget", "time_limit", "method"):
        assert type(params[option].type) is type(alloc[option].type)


def test_the_command_list_names_alloc_s_default_method():
    default = inspect.signature(allocate).parameters["method"].default
    assert f"{default} by default" in COMMANDS["alloc"][1]


def test_errors_name_the_option_that_was_given(capsys):
    # liveness takes --tile, oom --tiles: each error must name the one the user typed
    from pathlib import Path

    from tilemem.cli import main

    example = Path(__file__).resolve().parents[1] / "examples" / "seed.json"
    for name, option in (("liveness", "--tile"), ("oom", "--tiles")):
        assert main([name, str(example), option, "99999"]) == 2
        line = capsys.readouterr().err.strip()
        assert line.startswith("tilemem: error:") and f"{option}: tile 99999" in line, line
