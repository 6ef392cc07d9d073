"""How fast a report is to use in headless Chromium: open it, then each interaction, in ms.

Used by `bench_reports.py --browser` (reports it renders) and `--open FILE...` (reports on disk,
e.g. one rendered by an older version, timed round after round against a newer one).

Every figure is measured inside the page with `performance.now()` and ends when the result is on
screen: after the handler ran, the next frame (style, layout, paint) is waited for
(`requestAnimationFrame`, then a task). "open" is from the start of navigation to the first frame
after the page's script ran. The filter is timed from the input event to the frame showing the
filtered rows (any debounce the page applies included).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
STEPS = (
    "open",
    "toggle",
    "ops",
    "expand_all",
    "sort",
    "toggle_expanded",
    "scroll_end",
    "filter",
    "unfilter",
    "collapse_all",
)

NEXT_FRAME = "new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)))"
# Click an element (found by a function of the page) and wait for the frame that shows the result.
CLICK = f"""async (find) => {{
  const el = new Function("return (" + find + ")()")();
  if (!el) {{ return null; }}
  const t0 = performance.now();
  el.click();
  await {NEXT_FRAME};
  return performance.now() - t0;
}}"""
# Type into the filter and wait until the row count changed, then for the next frame.
FILTER = f"""async (text) => {{
  const shown = document.getElementById("shown");
  const before = shown.textContent;
  const input = document.getElementById("filter");
  const t0 = performance.now();
  input.value = text;
  input.dispatchEvent(new Event("input", {{ bubbles: true }}));
  const given = performance.now();
  while (shown.textContent === before) {{
    if (performance.now() - given > 30000) {{ return null; }}  // nothing changed: not timed
    await new Promise(r => setTimeout(r, 2));
  }}
  await {NEXT_FRAME};
  return performance.now() - t0;
}}"""
SCROLL_END = f"""async () => {{
  const box = document.getElementById("layers-scroll");
  if (box) {{ box.scrollIntoView(); }}
  const t0 = performance.now();
  if (box) {{ box.scrollTop = box.scrollHeight; }}
  window.scrollTo(0, document.documentElement.scrollHeight);
  await {NEXT_FRAME};
  await {NEXT_FRAME};
  return performance.now() - t0;
}}"""
OPENED = f"async () => {{ await {NEXT_FRAME}; return performance.now(); }}"
SHOWN = "#layers tr.row:not([hidden])"
FIRST_CLOSED = f"() => document.querySelector('{SHOWN} button.toggle[aria-expanded=false]')"
FIRST_OPS = f"() => document.querySelector('{SHOWN} button.ops')"
SECOND_TOGGLE = f"() => document.querySelectorAll('{SHOWN} button.toggle')[1]"
SELF_CPU = (
    "() => Array.from(document.querySelectorAll('#layers thead th'))"
    ".find(th => th.textContent.trim() === 'Self CPU')"
)
# A layer with ops to filter by: not the root (its path, "", filters nothing).
LEAF_PATH = (
    f"() => Array.from(document.querySelectorAll('{SHOWN} button.ops'))"
    ".map(b => b.closest('tr').dataset.path).filter(p => p).pop() || null"
)


def launch(playwright: Any) -> Any:
    return playwright.chromium.launch(executable_path=shutil.which("chromium"), args=ARGS)


def time_report(browser: Any, html: Path) -> dict[str, float | None]:
    """Milliseconds for each of STEPS on a fresh page of `html` (None: a step that could not run
    on this page, e.g. no layer with ops on screen; it is left out of every median)."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(html.as_uri(), wait_until="load", timeout=120_000)
        ms: dict[str, float | None] = {"open": page.evaluate(OPENED)}
        click: Callable[[str], float | None] = lambda find: page.evaluate(CLICK, find)  # noqa: E731
        ms["toggle"] = click(FIRST_CLOSED)
        ms["ops"] = click(FIRST_OPS)  # None when the subtree opened shows no layer with ops
        ms["expand_all"] = click("() => document.getElementById('expand-all')")
        leaf = page.evaluate(LEAF_PATH)  # a layer with ops, to filter by later
        ms["sort"] = click(SELF_CPU)
        ms["toggle_expanded"] = click(SECOND_TOGGLE)
        click(SECOND_TOGGLE)  # open it again, so the filter works on the whole expanded table
        ms["scroll_end"] = page.evaluate(SCROLL_END)
        page.evaluate("() => window.scrollTo(0, 0)")
        ms["filter"] = page.evaluate(FILTER, leaf) if leaf else None
        ms["unfilter"] = page.evaluate(FILTER, "") if leaf else None
        ms["collapse_all"] = click("() => document.getElementById('collapse-all')")
        return ms
    finally:
        page.close()
