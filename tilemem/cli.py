"""The ``tilemem`` command line. Commands load lazily, so ``tilemem --help`` is instant.

Bad input (``ReportError``) prints one line, ``tilemem: error: FILE: what (field, record)``, on
stderr and exits with status 2, without a traceback.
"""
from __future__ import annotations

import importlib
import sys

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
    "alloc": ("tilemem.commands.alloc:alloc", "Re-run allocation (replay, heuristic, exact)."),
    "report": ("tilemem.commands.report:report", "Memory figures in the graph profile's format."),
    "oom": ("tilemem.commands.oom:oom", "Diagnose out-of-memory tiles."),
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

    Reads Poplar lowered-variables reports (debug.loweredVarDumpFile, .json or tilemem .capnp).
    """


def main(argv=None) -> int:
    from .errors import ReportError

    try:
        rc = cli.main(args=argv, prog_name="tilemem", standalone_mode=False)
    except ReportError as e:
        click.echo(f"tilemem: error: {e}", err=True)
        return 2
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.ClickException as e:
        e.show()
        return e.exit_code
    except click.exceptions.Abort:
        click.echo("tilemem: aborted", err=True)
        return 130
    except KeyboardInterrupt:
        click.echo("tilemem: interrupted", err=True)
        return 130
    except BrokenPipeError:
        return 0
    return rc if isinstance(rc, int) else 0


if __name__ == "__main__":
    sys.exit(main())
