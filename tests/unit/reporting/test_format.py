"""Tree rows and number formatting shared by every renderer."""

from __future__ import annotations

import hybridprof
from hybridprof.analysis.tree import ancestors, tree_rows
from hybridprof.datamodel import Environment, ModuleRecord, ProfilePlan, ProfileSession, Stat
from hybridprof.reporting.format import (
    format_bytes,
    format_percent,
    format_time_us,
    installed_version,
)


def test_time_and_memory_formats_follow_torchprof_units() -> None:
    assert format_time_us(51.858) == "51.858us"
    assert format_time_us(1832.0) == "1.832ms"
    assert format_time_us(2_100_000.0) == "2.100s"
    assert format_bytes(512) == "512 B"
    assert format_bytes(1536) == "1.50 KB"
    assert format_bytes(-3 * 1024 * 1024) == "-3.00 MB"
    assert format_percent(1, 4) == "25.0%"
    assert format_percent(1, 0) == "-"


def test_tree_rows_add_ancestors_in_module_order() -> None:
    def rec(path: str) -> ModuleRecord:
        return ModuleRecord(path, "Linear", 1, Stat.of([1.0]), Stat.of([1.0]))

    session = ProfileSession(
        plan=ProfilePlan(root_class="Net", targets=()),
        environment=Environment("0", "0", "0", "x", "x", 1, "cpu"),
        records=(rec("b.1"), rec("a.0"), rec("b.0")),
        strategy="session",
    )
    rows = tree_rows(session)
    assert [r.path for r in rows] == ["", "b", "b.1", "b.0", "a", "a.0"]
    assert rows[0].name == "Net" and rows[0].record is None and rows[0].has_children
    assert not rows[2].has_children and rows[2].record is not None
    assert ancestors("a.b.c") == ["", "a", "a.b"]


def test_tree_rows_follow_plan_order() -> None:
    from hybridprof.datamodel import ModuleTarget

    targets = tuple(
        ModuleTarget(p, "M", "m.M", p.count(".") + 1 if p else 0, False, True, "x")
        for p in ["", "a", "a.0", "b", "b.0", "b.1"]
    )
    session = ProfileSession(
        plan=ProfilePlan(root_class="Net", targets=targets),
        environment=Environment("0", "0", "0", "x", "x", 1, "cpu"),
        records=tuple(
            ModuleRecord(p, "Linear", 1, Stat.of([1.0]), Stat.of([1.0]))
            for p in ["b.1", "a.0", "b.0"]
        ),
        strategy="session",
    )
    assert [r.path for r in tree_rows(session)] == ["", "a", "a.0", "b", "b.0", "b.1"]


def test_pages_stamp_the_installed_version_the_package_declares() -> None:
    # The pages read the version from the package metadata (reporting/ sits below the package's
    # root); an install whose metadata and __version__ disagree would stamp the wrong one.
    assert installed_version() == hybridprof.__version__
