from __future__ import annotations

import click

from .guards import nothing_to_analyse
from .options import report_path_argument


@click.command()
@report_path_argument
@click.option("--allocation", type=click.Path(),
              help="Check the offsets of this file (a report of the same variables, e.g. "
                   "written by `tilemem alloc`) instead of REPORT's own.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--no-region-span-rule", is_flag=True,
              help="Waive the inferred rule that no variable crosses the region boundary "
                   "(its findings are still listed, as waived).")
@click.option("--limit", type=click.IntRange(min=0), default=20, show_default=True,
              help="How many violations of each rule to list (all are counted).")
def check(report, allocation, as_json, no_region_span_rule, limit):
    """Check an allocation of REPORT against every placement rule.

    Rules: overlap (conflicting variables share no byte), alignment, interleaved, code,
    region-span (inferred), element, region, lowest256KB (inferred), capacity (no variable
    straddles tileMemory). Bytes past tileMemory are reported per tile as overflow, not as a
    violation. Exit status: 0 valid, 1 violations, 2 bad input.
    """
    from .. import api
    from ..load.allocation import offsets_from_file
    from ..rules import DEFAULT_RULES, Rules
    from ..text import check_text
    from .options import echo_json

    r = api.load(report)
    offsets = offsets_from_file(r, allocation) if allocation else None
    rules = Rules(no_region_span=False) if no_region_span_rule else DEFAULT_RULES
    res = api.check(r, offsets, rules=rules, limit=limit).result
    empty = nothing_to_analyse(r)
    if empty and not as_json:
        click.echo(f"{report}: {empty}")
        return
    if as_json:
        echo_json(res.to_json(report=str(report),
                              allocation=str(allocation) if allocation else None))
    else:
        click.echo(check_text(r, report, allocation, res))
    if not res.ok:
        # SystemExit, not ctx.exit(1): tilemem.cli.main runs click with standalone_mode=False,
        # which turns ctx.exit codes into a return value that main() does not pass on.
        raise SystemExit(1)
