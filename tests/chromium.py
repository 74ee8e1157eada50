"""The system's chromium (Debian's package), headless, driven by Playwright's Python package.

Playwright's own browser download (``playwright install``) is not used: ``executable_path``
points at the chromium on PATH, which ``.ci/run`` installs with apt.

    with launched() as browser, opened(browser, "file:///tmp/r.html#tile=0") as (page, problems):
        wait_ready(page)
        page.select_option("#tile-pick", "2")
        assert problems == []

``python tests/chromium.py PAGE.html[#tile=N] OUT.png`` takes the documentation's screenshot
of a ``tilemem html`` page (docs/README.md).
"""
from __future__ import annotations

import shutil
from contextlib import contextmanager

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

ARGS = ["--no-sandbox",                    # tests and CI run as root in a container
        "--disable-gpu",                   # none there; software rendering
        "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]   # no traffic but the page's own

#: milliseconds to wait for the page (the example's page opens in 2-3 s; machines under load)
TIMEOUT = 60_000

#: addresses a self-contained page may load: itself, and what its scripts make in memory
LOCAL = ("file:", "data:", "blob:", "about:")


def find_chromium() -> str | None:
    for name in NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


@contextmanager
def launched(exe: str | None = None):
    """A headless chromium (Playwright's ``Browser``), closed on leaving."""
    from playwright.sync_api import sync_playwright

    exe = exe or find_chromium()
    if exe is None:
        raise FileNotFoundError("no chromium on PATH")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, headless=True, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def opened(browser, url: str, width: int = 1400, height: int = 1000):
    """``(page, problems)``: ``url`` open in a fresh context of ``width`` x ``height``;
    ``problems`` collects what a person would see go wrong or a self-contained page must not
    do: console errors and failed assertions, uncaught exceptions, failed loads, and any load
    from elsewhere than the file itself."""
    context = browser.new_context(viewport={"width": width, "height": height})
    context.set_default_timeout(TIMEOUT)
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console.{m.type}: {m.text}")
            if m.type in ("error", "assert") else None)
    page.on("pageerror", lambda e: problems.append(f"exception: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"failed to load {r.url}: {r.failure}"))
    page.on("request", lambda r: None if r.url.startswith(LOCAL)
            else problems.append(f"loaded from elsewhere: {r.url}"))
    try:
        page.goto(url)
        yield page, problems
    finally:
        context.close()


def wait_ready(page) -> None:
    """Until the page's script has started (``tilemem.plot`` page.js sets ``data-ready``)
    and the plotting library has drawn every figure."""
    page.wait_for_selector("body[data-ready='1']", state="attached")
    page.wait_for_function("Bokeh.documents[0].is_idle")


def main(argv=None) -> int:
    """``python tests/chromium.py PAGE.html[#tile=N] OUT.png [--width W] [--height H]
    [--section ID]``: a screenshot of a page once it is ready (for docs)."""
    import argparse
    import time
    from pathlib import Path

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("page")
    ap.add_argument("out")
    ap.add_argument("--width", type=int, default=1400)
    ap.add_argument("--height", type=int, default=1000)
    ap.add_argument("--section", help="scroll this element to the top first")
    a = ap.parse_args(argv)
    path, _, frag = a.page.partition("#")
    url = Path(path).resolve().as_uri() + (f"#{frag}" if frag else "")
    t0 = time.monotonic()
    with launched() as browser, opened(browser, url, a.width, a.height) as (page, problems):
        wait_ready(page)
        ready = time.monotonic() - t0
        since_open = page.evaluate("performance.now()") / 1000   # from navigation's start
        if a.section:
            page.locator(f"#{a.section}").evaluate("e => e.scrollIntoView()")
        page.wait_for_timeout(500)
        page.screenshot(path=a.out)
        if problems:
            print("\n".join(problems))
            return 1
    print(f"{a.out}: page ready {since_open:.1f} s after it was opened "
          f"({ready:.1f} s after chromium started)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
