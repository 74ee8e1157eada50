from __future__ import annotations

import click

from ..output import report_path_argument
from .guards import nothing_to_analyse


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
    from ..check import INFERRED, check_allocation, offsets_from_allocation
    from ..load import load_report
    from ..output import echo_json
    from ..rules import DEFAULT_RULES, Rules

    r = load_report(report)
    offsets = None
    if allocation:
        offsets = offsets_from_allocation(r, load_report(allocation), allocation)
    rules = Rules(no_region_span=False) if no_region_span_rule else DEFAULT_RULES
    res = check_allocation(r, offsets, rules, limit=limit)
    empty = nothing_to_analyse(r)
    if empty and not as_json:
        click.echo(f"{report}: {empty}")
        return
    if as_json:
        d = res.to_json()
        d["report"] = str(report)
        d["allocation"] = str(allocation) if allocation else None
        echo_json(d)
    else:
        _print(r, report, allocation, res, INFERRED)
    if not res.ok:
        # SystemExit, not ctx.exit(1): tilemem.cli.main runs click with standalone_mode=False,
        # which turns ctx.exit codes into a return value that main() does not pass on.
        raise SystemExit(1)


def _print(r, report, allocation, res, inferred):
    what = f"{report}" + (f" (allocation {allocation})" if allocation else "")
    n = int(r.allocated.sum())
    tiles = len(r.tiles_in_use())
    documented = [k for k in res.counts if k not in inferred]
    for title, names in (("rules", documented),
                         ("inferred rules", [k for k in res.counts if k in inferred])):
        bad = [k for k in names if res.counts[k]]
        if not bad:
            continue
        click.echo(f"{title}:")
        for k in bad:
            click.echo(f"  {k}: {res.counts[k]:,} violation(s)")
            shown = [v for v in res.violations if v.rule == k]
            for v in shown:
                click.echo(f"    {v}")
            if res.counts[k] > len(shown):
                click.echo(f"    ... {res.counts[k] - len(shown):,} more")
    for k, count in res.waived_counts.items():
        if count:
            click.echo(f"waived (inferred rule switched off): {k}: {count:,} finding(s)")
            for v in [v for v in res.waived if v.rule == k]:
                click.echo(f"    {v}")
    over = res.overflowed_tiles()
    if len(over):
        worst = over[res.overflow_bytes[over].argsort()[::-1][:5]]
        click.echo(f"overflow: {int(res.overflow_bytes.sum()):,} bytes past tileMemory on "
                   f"{len(over):,} tile(s) (reported, not a rule violation); most on tile(s) "
                   + ", ".join(f"{t} ({res.overflow_bytes[t]:,} B)" for t in worst.tolist()))
    if res.ok:
        click.echo(f"{what}: valid allocation ({n:,} variables on {tiles:,} tiles)")
    else:
        click.echo(f"{what}: INVALID: {res.num_violations:,} violation(s)")
