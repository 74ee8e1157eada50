"""The ``tilemem`` command line. Commands load lazily, so ``tilemem --help`` is instant.

Bad input (``ReportError``) prints one line, ``tilemem: error: FILE: what (field, record)``, on
stderr and exits with status 2, without a traceback; so does bad usage (click's errors, as
``tilemem: error: what (see 'tilemem CMD --help')``).
"""
from __future__ import annotations

import importlib
import sys
import warnings

import click

# command name -> "module:function" (each command module imports its heavy parts itself)
COMMANDS = {
    "info": ("tilemem.commands.info:info", "Summarise a report: geometry, tiles, bytes."),
    "convert": ("tilemem.commands.convert:convert", "Convert a report between .json and .capnp."),
    "generate": ("tilemem.commands.generate:generate", "Generate a realistic report."),
    "import-minimalloc": ("tilemem.commands.minimalloc:import_minimalloc",
                          "Make a one-tile report from a MiniMalloc CSV."),
    "export-minimalloc": ("tilemem.commands.minimalloc:export_minimalloc",
                          "Write one tile of a report as a MiniMalloc CSV."),
    "liveness": ("tilemem.commands.liveness:liveness",
                 "Always-live bytes, maximum live bytes and the peak live set."),
    "check": ("tilemem.commands.check:check", "Check an allocation against every placement rule."),
    "alloc": ("tilemem.commands.alloc:alloc",
              "Re-run allocation (auto by default; replay, heuristic, exact)."),
    "report": ("tilemem.commands.report:report", "Memory figures in the graph profile's format."),
    "oom": ("tilemem.commands.oom:oom",
            "Diagnose out-of-memory tiles: the program first, then each tile."),
    "what-if": ("tilemem.commands.whatif:what_if",
                "Out of memory with some tensors offloaded or shrunk?"),
    "split": ("tilemem.commands.split:split", "Where to split the program over IPUs."),
    "config": ("tilemem.commands.config:config",
               "The whole configuration that fits: IPUs, layers, levers, micro-batch."),
    "diff": ("tilemem.commands.diff:diff", "Compare two compilations of one program."),
    "plot": ("tilemem.commands.plot:plot", "Draw the memory map of one tile."),
    "plot-tiles": ("tilemem.commands.plot:plot_tiles", "Draw memory used per tile."),
    "plot-liveness": ("tilemem.commands.plot_liveness:plot_liveness",
                      "Draw live bytes over program steps for one tile."),
    "html": ("tilemem.commands.html:html",
             "Write a one-file interactive HTML report (opens offline)."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return list(COMMANDS)

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        module, func = COMMANDS[name][0].split(":")
        return getattr(importlib.import_module(module), func)

    def format_commands(self, ctx, formatter):  # help text without importing the commands
        with formatter.section("Commands"):
            formatter.write_dl([(n, h) for n, (_, h) in COMMANDS.items()])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tilemem")
def cli():
    """tilemem: memory allocator and liveness analyser for IPU tiles.

    Reads Poplar lowered-variables reports (.json, or tilemem's .capnp). Get one from Poplar
    with POPLAR_ENGINE_OPTION='{"debug.loweredVarDumpFile": "vars.json"}'.
    """


def main(argv=None) -> int:
    """Run the CLI. Bad input and bad usage print one line on stderr and exit with status 2;
    warnings about input tilemem repaired (``ReportWarning``) are printed once the command
    has succeeded (after an error, the error line is all there is)."""
    import warnings

    from .commands import firstrun
    from .errors import ReportError, ReportWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ReportWarning)
        try:
            # a first run on a small report: the kernels as Python, compiled in the background
            firstrun.choose(list(sys.argv[1:] if argv is None else argv))
            rc = cli.main(args=argv, prog_name="tilemem", standalone_mode=False)
        except ReportError as e:
            return _error(str(e))
        except click.exceptions.NoArgsIsHelpError as e:  # bare `tilemem`: the help
            click.echo(e.ctx.get_help())
            return 0
        except click.UsageError as e:
            where = f" (see '{e.ctx.command_path} --help')" if e.ctx is not None else ""
            return _error(f"{_one_line(e.format_message()).rstrip('.')}{where}")
        except click.exceptions.Exit as e:
            return e.exit_code
        except click.ClickException as e:
            _error(_one_line(e.format_message()))
            return e.exit_code
        except click.exceptions.Abort:
            click.echo("tilemem: aborted", err=True)
            return 130
        except KeyboardInterrupt:
            click.echo("tilemem: interrupted", err=True)
            return 130
        except BrokenPipeError:
            return 0
        except SystemExit:  # check's status 1 (violations): keep the warnings
            _show(caught, ReportWarning)
            raise
    _show(caught, ReportWarning)
    return rc if isinstance(rc, int) else 0


def _error(message: str) -> int:
    click.echo(f"tilemem: error: {message}", err=True)
    return 2


def _one_line(text: str) -> str:
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def _show(caught, category) -> None:
    for w in caught:
        if issubclass(w.category, category):
            click.echo(f"tilemem: warning: {w.message}", err=True)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)


if __name__ == "__main__":
    sys.exit(main())
