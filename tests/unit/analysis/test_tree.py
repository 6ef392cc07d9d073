"""A session whose tree is as deep as a session may be (1,000 levels) renders in every format; the
tree is walked without recursion and each row's prefix and ancestors are worked out once (a
3,000-deep chain took minutes: every row listed all its ancestors). Deeper is refused at load."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from hybridprof.analysis.layer_table import layer_table
from hybridprof.analysis.tree import inclusive_us, total_profiled_us, tree_rows
from hybridprof.cli.terminal import terminal_table
from hybridprof.datamodel import ProfileSession
from hybridprof.datamodel.jsonbounds import MAX_PATH_PARTS
from hybridprof.errors import SessionFileError
from hybridprof.reporting import renderer_for
from tests.sessions import record, small_session, target

DEPTH = MAX_PATH_PARTS


def chain(depth: int) -> ProfileSession:
    """a, a.a, a.a.a, ...: `depth` nested layers, each 1 us of its own."""
    session = small_session()
    paths = [".".join(["a"] * k) for k in range(1, depth + 1)]
    records = tuple(
        record(p, "Block", 1.0, float(depth - i), is_leaf=i == depth - 1)
        for i, p in enumerate(paths)
    )
    targets = (session.plan.targets[0], *(target(p, "Block", leaf=False) for p in paths))
    return replace(session, records=records, plan=replace(session.plan, targets=targets))


def test_a_chain_as_deep_as_a_session_may_be_makes_its_rows_in_tree_order() -> None:
    session = chain(DEPTH)
    rows = tree_rows(session)
    assert [r.path for r in rows] == ["", *(r.path for r in session.records)]
    assert [r.depth for r in rows] == list(range(DEPTH + 1))
    shares = inclusive_us(replace(session, outside_cpu_us=session.records[0].self_cpu_us))
    assert shares["a"] == pytest.approx(DEPTH) and shares[""] == pytest.approx(DEPTH)
    assert total_profiled_us(replace(session, iteration_cpu_us=())) == pytest.approx(DEPTH)
    assert len(layer_table(session).tree()) == DEPTH + 1


@pytest.mark.parametrize("extension", [".txt", ".html", ".csv", ".json"])
def test_a_chain_as_deep_as_a_session_may_be_renders(extension: str) -> None:
    session = chain(DEPTH)
    rendered = renderer_for(f"x{extension}").render(session)
    assert isinstance(rendered, str) and len(rendered) > DEPTH


def test_the_terminal_table_of_a_deep_chain_keeps_the_heaviest_with_their_parents() -> None:
    table, note, *_ = terminal_table(chain(DEPTH))  # then what to know of it (the order)
    assert note == (
        "(the 58 heaviest of 1000 profiled layers by self CPU time, with their parents; "
        "'... N more' stands for rows left out; the report lists every layer)"
    )
    lines = table.splitlines()
    assert len(lines) == 2 + 1 + 58 + 1  # header, rule, the root, the 58 layers, the rest
    assert lines[-1].split(" | ")[0].strip().endswith("└── ... 942 more")


def test_a_path_deeper_than_hybridprof_writes_is_refused_at_load() -> None:
    data = json.loads(small_session().to_json())
    data["records"][1]["path"] = ".".join(["a"] * (DEPTH + 1))
    with pytest.raises(SessionFileError) as caught:
        ProfileSession.from_json(json.dumps(data))
    assert str(caught.value) == (
        "corrupt hybridprof-session file: the path of records[1] is 1,001 modules deep "
        "(hybridprof writes none over 1,000); write it again with hybridprof"
    )
