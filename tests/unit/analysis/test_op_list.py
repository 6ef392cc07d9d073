"""Which ops a table lists under a layer: the heaviest few, the rest summed per pass."""

from __future__ import annotations

import pytest

from hybridprof.analysis.op_list import MAX_EVENTS, op_list
from tests.sessions import op

FORWARD = tuple(op(f"aten::fwd{i}", 1, float(i + 1), float(i + 1)) for i in range(12))
BACKWARD = tuple(op(f"aten::bwd{i}", 2, 0.5 + 2 * i, 0.0, bwd=True) for i in range(5))


def test_the_heaviest_are_listed_and_the_rest_summed_per_pass() -> None:
    chosen = op_list(FORWARD + BACKWARD, 8)
    ranked = sorted(FORWARD + BACKWARD, key=lambda o: -o.self_cpu_us)
    assert chosen.listed == tuple(ranked[:8])
    [forward, backward] = chosen.left_out
    rest = ranked[8:]
    assert (forward.ops, forward.summed.backward) == (
        len([o for o in rest if not o.backward]),
        False,
    )
    assert (backward.ops, backward.summed.backward) == (len([o for o in rest if o.backward]), True)
    # The self column still adds up to every op's: listed plus left out.
    shown = sum(o.self_cpu_us for o in chosen.listed)
    summed = sum(r.summed.self_cpu_us for r in chosen.left_out)
    assert shown + summed == pytest.approx(sum(o.self_cpu_us for o in FORWARD + BACKWARD))
    assert sum(r.summed.calls for r in chosen.left_out) == sum(o.calls for o in rest)
    assert all(r.summed.total_cpu_us == 0.0 for r in chosen.left_out)  # totals nest: not summed


def test_a_pass_with_one_op_left_out_lists_it() -> None:
    chosen = op_list(FORWARD[:9], 8)
    assert chosen.left_out == () and len(chosen.listed) == 9
    assert chosen.listed[-1].name == "aten::fwd0"  # the lightest, still in weight order


def test_none_lists_every_op_and_few_ops_need_no_summary() -> None:
    assert len(op_list(FORWARD + BACKWARD, None).listed) == len(FORWARD + BACKWARD)
    assert op_list(FORWARD + BACKWARD, None).left_out == ()
    assert op_list(FORWARD[:MAX_EVENTS]).left_out == ()
    with pytest.raises(ValueError, match="max_events must be 0 or more"):
        op_list(FORWARD, -1)
    with pytest.raises(ValueError, match="got True"):
        op_list(FORWARD, True)  # type: ignore[arg-type]  # a bool is no count


def test_device_time_counts_in_the_order() -> None:
    cheap_on_cpu = op("aten::mm", 1, 1.0, 1.0)
    on_device = type(cheap_on_cpu)("aten::mm", 1, 1.0, 1.0, self_device_us=500.0)
    chosen = op_list((*FORWARD, on_device), 1)
    assert chosen.listed == (on_device,)
