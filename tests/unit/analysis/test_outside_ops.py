"""The line that says what the `(outside modules)` row holds, from hand-made sessions."""

from __future__ import annotations

from dataclasses import replace

from hybridprof.analysis.outside_ops import RANGE_WORDS, outside_note, unprofiled_parents
from hybridprof.datamodel import Finding, FindingKind, ModuleClassInfo, Stat
from hybridprof.reporting.text.text_table import outside_line
from hybridprof.runtime.events.training_names import BACKWARD_PREFIX, CLOSURE_RANGE, STEP_RANGE
from tests.sessions import backward_session, nested_session, op, small_session

NODE = BACKWARD_PREFIX + "MseLossBackward0"


def test_the_note_names_the_heaviest_ops_with_their_share_of_the_row() -> None:
    ops = (
        op("aten::add", 2, 40.0, 40.0),
        op(NODE, 1, 30.0, 35.0, bwd=True),
        op("aten::mse_loss", 1, 20.0, 25.0),
        op("aten::empty", 1, 10.0, 10.0),
    )
    session = replace(backward_session(), outside_cpu_us=Stat(100.0, 90.0, 110.0), outside_ops=ops)
    assert outside_note(session) == (
        "aten::add 40%, MseLossBackward0 (bwd) 30%, aten::mse_loss 20%: the code around the "
        "model (the loss), autograd's work for it"
    )


def test_the_step_range_is_said_as_the_time_between_ops() -> None:
    session = replace(
        small_session(),
        outside_cpu_us=Stat(50.0, 50.0, 50.0),
        outside_ops=(op(STEP_RANGE, 1, 50.0, 900.0),),
    )
    assert outside_note(session) == (
        "hybridprof::step (time between ops: Python, autograd's engine) 100%: the code around "
        "the model (the loss)"
    )
    assert set(RANGE_WORDS) == {STEP_RANGE, CLOSURE_RANGE}  # the runtime's names


def test_no_line_without_ops_or_under_one_percent_of_the_headline() -> None:
    old = replace(small_session(), outside_cpu_us=Stat(100.0, 100.0, 100.0))
    assert outside_note(old) is None and outside_line(old) is None
    ops = (op("aten::add", 1, 5.0, 5.0),)
    tiny = replace(old, outside_cpu_us=Stat(5.0, 5.0, 5.0), outside_ops=ops)
    assert outside_note(tiny) is not None
    assert outside_line(tiny) is None  # 5 us of a 925 us headline
    big = replace(tiny, outside_cpu_us=Stat(50.0, 50.0, 50.0))
    assert outside_line(big) == (
        "(outside profiled modules) holds aten::add 10%: the code around the model (the loss)"
    )


def test_the_parents_named_are_the_unprofiled_ones_that_run_ops_themselves() -> None:
    session = nested_session()  # leaves selected; blocks.0 found running torch.flatten itself
    assert unprofiled_parents(session) == ["blocks.0", "blocks.1"]  # no source read: the tree
    info = ModuleClassInfo("nets.Block", None)
    read = replace(session, plan=replace(session.plan, classes=(info,)))
    assert unprofiled_parents(read) == ["blocks.0"]  # the source read: the planner's finding
    root = Finding(FindingKind.INLINE_OPS, "", "Net.forward runs torch.add")
    plan = replace(read.plan, findings=(*read.plan.findings, root))
    assert unprofiled_parents(replace(read, plan=plan)) == ["Net", "blocks.0"]
    targets = tuple(replace(t, selected=True) for t in plan.targets)
    complete = replace(read, plan=replace(plan, targets=targets))
    assert unprofiled_parents(complete) == []  # every parent has its row
