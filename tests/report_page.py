"""Reading an HTML report the way its script does: the layer table and op breakdowns it embeds as
JSON (the page draws the table from them, so the rows are data, not markup)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from hybridprof.reporting.page.context import ReportContext
from hybridprof.reporting.page.tree_table import (
    COLLAPSED,
    DERIVED,
    HAS_CHILDREN,
    OUTSIDE,
    UNPROFILED,
    cell_text,
)


def context_cells(ctx: ReportContext, path: str) -> dict[str, str]:
    """A row's cells as a report context shows them, by column key."""
    row = next(r for r in ctx.rows if r.path == path)
    return {c.key: cell_text(row, c) for c in ctx.columns}


def _block(page: str, block_id: str) -> Any:
    found = re.search(
        rf'<script type="application/json" id="{block_id}">(.*?)</script>', page, re.S
    )
    assert found is not None, f"no {block_id} block"
    return json.loads(found.group(1))


def page_data(page: str) -> dict[str, Any]:
    data: dict[str, Any] = _block(page, "hp-data")
    return data


def page_ops(page: str) -> dict[str, list[list[Any]]]:
    ops: dict[str, list[list[Any]]] = _block(page, "hp-ops")
    return ops


@dataclass(frozen=True)
class PageRow:
    path: str
    parent: str | None
    depth: int
    flags: int
    heat: int
    op_count: int
    cells: dict[str, str]  # column label -> text

    @property
    def has_children(self) -> bool:
        return bool(self.flags & HAS_CHILDREN)

    @property
    def collapsed(self) -> bool:
        return bool(self.flags & COLLAPSED)

    @property
    def profiled(self) -> bool:
        return not self.flags & UNPROFILED

    @property
    def derived(self) -> bool:
        return bool(self.flags & DERIVED)

    @property
    def outside(self) -> bool:
        return bool(self.flags & OUTSIDE)


def page_rows(page: str) -> dict[str, PageRow]:
    """The layer table's rows by path, in the page's order."""
    table = page_data(page)["table"]
    labels = [c["label"] for c in table["columns"]]
    paths = [r[0] for r in table["rows"]]
    return {
        path: PageRow(path, None if parent < 0 else paths[parent], depth, flags, heat, ops,
                      dict(zip(labels, texts, strict=True)))
        for path, parent, depth, flags, heat, ops, texts, _ in table["rows"]
    }  # fmt: skip
