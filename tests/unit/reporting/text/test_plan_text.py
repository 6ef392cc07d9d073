"""The plan on the terminal stays readable for big models: capped tree, grouped findings."""

from __future__ import annotations

from hybridprof.datamodel import Finding, FindingKind, ModuleTarget, ProfilePlan, SourceSpan
from hybridprof.reporting.text.plan_text import render_plan


def stack_plan(blocks: int) -> ProfilePlan:
    targets = [ModuleTarget("", "Net", "m.Net", 0, False, False, "not a leaf")]
    findings = []
    for i in range(blocks):
        targets.append(ModuleTarget(f"{i}", "Block", "m.Block", 1, False, False, "not a leaf"))
        targets.append(ModuleTarget(f"{i}.fc", "Linear", "torch.nn.Linear", 2, True, True, "leaf"))
        findings.append(
            Finding(
                FindingKind.INLINE_OPS,
                f"{i}",
                "Block.forward runs 1 op(s) directly (+)",
                SourceSpan("/m/net.py", 9),
            )
        )
    findings.append(
        Finding(FindingKind.NEVER_CALLED, "0.fc", "never called", SourceSpan("/m/net.py", 4))
    )
    return ProfilePlan(root_class="Net", targets=tuple(targets), findings=tuple(findings))


def test_big_tree_is_capped_with_a_count_of_what_is_hidden() -> None:
    lines = render_plan(stack_plan(100), "/m", max_rows=10).splitlines()
    tree = lines[2:13]
    assert len([ln for ln in tree if ln.startswith("[")]) == 10
    assert tree[10] == (
        "... 191 more modules (96 selected): the saved plan lists every module; "
        "--max-rows 0 prints them all"
    )
    everything = render_plan(stack_plan(100), "/m", max_rows=0).splitlines()
    assert len([ln for ln in everything if ln.startswith("[")]) == 201


def test_findings_from_one_source_line_print_once() -> None:
    text = render_plan(stack_plan(100), "/m")
    findings = text.split("findings:\n", 1)[1].rstrip().splitlines()
    assert findings == [
        "  inline_ops: 0, 1, 2 and 97 more: Block.forward runs 1 op(s) directly (+) (net.py:9)",
        "  never_called: 0.fc: never called (net.py:4)",
    ]
    few = render_plan(stack_plan(2), "/m")
    assert "inline_ops: 0: Block" in few and "inline_ops: 1: Block" in few
