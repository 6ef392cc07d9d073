"""The `(outside modules)` row says what it holds: its ops, forward and backward apart, in the
session, the tables, the HTML's op breakdown and the ops DataFrame."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import hybridprof
from hybridprof.analysis.layer_table import layer_table
from hybridprof.datamodel import ProfileSession
from hybridprof.datamodel.schema import SCHEMA_VERSION
from hybridprof.errors import SessionFileError
from hybridprof.reporting.dataframe import ops_frame
from hybridprof.reporting.page.templates import render_html
from hybridprof.reporting.text.fitted_table import TableChoice, fitted_table

LOSS_NODE = "autograd::engine::evaluate_function: MseLossBackward0"


class Block(nn.Module):
    """A parent with an inline op of its own: the residual add no child owns."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc(x)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def _train_step(leaves_only: bool = True) -> hybridprof.Profile:
    torch.manual_seed(0)
    model, x, y = Net(), torch.randn(8, 16), torch.randn(8, 4)
    with hybridprof.Profile(model, leaves_only=leaves_only) as prof:
        F.mse_loss(model(x), y).backward()
    return prof


@pytest.fixture(scope="module")
def profiled() -> hybridprof.Profile:
    return _train_step()


@pytest.fixture(scope="module")
def leaves(profiled: hybridprof.Profile) -> ProfileSession:
    return profiled.session()


def _ops(session: ProfileSession) -> dict[tuple[str, bool], int]:
    return {(op.name, op.backward): op.calls for op in session.outside_ops}


def test_the_outside_row_holds_the_parents_inline_ops_and_the_loss_backward_apart(
    leaves: ProfileSession,
) -> None:
    ops = _ops(leaves)
    assert ops[("aten::add", False)] == 2  # each block's residual add, in no leaf's range
    assert ops[("aten::mse_loss", False)] == 1  # the loss, computed around the model
    assert ops[(LOSS_NODE, True)] == 1  # its backward node, kept apart as a backward op
    assert ("aten::addmm", False) not in ops  # the Linear layers' own op is theirs
    assert leaves.outside_cpu_us is not None
    own = sum(op.self_cpu_us for op in leaves.outside_ops)
    assert own == pytest.approx(leaves.outside_cpu_us.median, rel=0.01)


def test_the_rows_and_the_outside_row_still_add_up_to_the_headline(leaves: ProfileSession) -> None:
    table = layer_table(leaves)
    measured = table.measured_iteration_us
    assert table.iteration_us == pytest.approx(measured, rel=0.01)
    rows = sum(r.own_us for r in table.rows)
    assert rows == pytest.approx(table.iteration_us, rel=0.01)


def test_with_the_parents_selected_their_add_is_theirs() -> None:
    complete = _train_step(leaves_only=False).session()
    ops = _ops(complete)
    assert ("aten::add", False) not in ops
    assert ops[("aten::mse_loss", False)] == 1 and ops[(LOSS_NODE, True)] == 1
    adds = [o for o in complete.record("blocks.0").ops if o.name == "aten::add"]  # type: ignore[union-attr]
    assert [(o.calls, o.backward) for o in adds] == [(1, False)]


def test_the_tables_show_the_ops_and_one_line_says_what_the_row_is(
    profiled: hybridprof.Profile, leaves: ProfileSession
) -> None:
    fitted = fitted_table(leaves, TableChoice(), show_events=True, max_events=None)
    lines = fitted.text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("(outside profiled modules)"))
    under = lines[at + 1 :]
    assert len(under) == len(leaves.outside_ops)  # the row's ops hang under it, the table's last
    cut = fitted_table(leaves, TableChoice(), show_events=True).text.splitlines()
    cut_at = next(i for i, line in enumerate(cut) if line.startswith("(outside profiled modules)"))
    cut_under = cut[cut_at + 1 :]  # by default the heaviest 8, then a "... K more ops" row per pass
    assert len(leaves.outside_ops) > 8 and 9 <= len(cut_under) <= 10
    assert any(line.strip().startswith("... ") and "more ops" in line for line in cut_under)
    assert any(line.strip().startswith("aten::add ") for line in under)
    assert any("MseLossBackward0" in line for line in under)
    (note,) = fitted.under
    assert note.startswith("(outside profiled modules) holds ") and "%" in note
    assert "inline ops of the unprofiled parents blocks.0, blocks.1" in note
    assert "leaves_only=False" in note and "the loss" in note
    plain = fitted_table(leaves, TableChoice())
    assert plain.under == (note,)  # the line shows without show_events too
    assert plain.text.splitlines()[-1].startswith("(outside profiled modules) ")
    shown = profiled.display(show_events=True, max_events=None).splitlines()  # the library's
    assert shown[-1] == note
    assert any(line.strip().startswith("aten::mse_loss ") for line in shown)


def test_the_html_and_the_ops_frame_carry_the_outside_ops(leaves: ProfileSession) -> None:
    page = render_html(leaves)
    data = page.split('id="hp-ops">', 1)[1].split("</script>", 1)[0]
    ops = json.loads(data)["(outside profiled modules)"]
    assert {(o[0], o[-1]) for o in ops} >= {("aten::add", False), (LOSS_NODE, True)}
    (note,) = fitted_table(leaves, TableChoice()).under
    assert note.replace("'", "&#39;") in page  # the same line, among the notes under the table
    frame = ops_frame(leaves)
    outside = frame[frame["path"] == "(outside profiled modules)"]
    assert set(zip(outside["op"], outside["backward"], strict=True)) >= {
        ("aten::add", False),
        ("aten::mse_loss", False),
        (LOSS_NODE, True),
    }


def test_the_outside_ops_are_saved_and_an_older_file_loads_without_them(
    leaves: ProfileSession,
) -> None:
    text = leaves.to_json()
    assert ProfileSession.from_json(text).outside_ops == leaves.outside_ops
    data = json.loads(text)
    assert data["schema_version"] == SCHEMA_VERSION >= 8 and "outside_ops" in data  # since 8
    del data["outside_ops"]
    data["schema_version"] = 7
    older = ProfileSession.from_json(json.dumps(data))
    assert older.outside_ops == () and older.outside_cpu_us == leaves.outside_cpu_us
    assert fitted_table(older, TableChoice()).under == ()  # no ops to say it with


def test_a_negative_outside_op_time_is_refused(leaves: ProfileSession) -> None:
    op = leaves.outside_ops[0]
    bad = replace(leaves, outside_ops=(replace(op, self_cpu_us=-5.0), *leaves.outside_ops[1:]))
    with pytest.raises(SessionFileError, match=r"outside_ops\[0\]\.self_cpu_us is -5"):
        ProfileSession.from_json(bad.to_json())
