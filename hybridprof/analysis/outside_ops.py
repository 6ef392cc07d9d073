"""What the `(outside modules)` row is made of, said in one line: its heaviest ops and where such
time comes from. Pure Python, from the session alone.

The row holds every op that ran in no profiled layer's range: with a leaves-only selection the
parents' own inline ops (a residual `x + self.fc(x)`, `F.relu` in a transformer layer, norm-first
glue), the code around the model (the loss), autograd's work for them (the loss's backward node,
AccumulateGrad of weights used outside every layer), and in a with-block the step range's own
time between ops. The ops say which.
"""

from __future__ import annotations

from hybridprof.datamodel import FindingKind, OpStat, ProfileSession

SHOWN_OPS = 3  # the heaviest ops the line names
SHOWN_PARENTS = 2  # and the unprofiled parents it names (then "and N more")


def outside_note(session: ProfileSession) -> str | None:
    """One line under the outside row: its heaviest ops with their share of the row, then what
    that time likely is; None when the session has no ops for it (older files, layer ranges
    only) or the row holds no time."""
    outside = session.outside_cpu_us
    ops = heaviest_outside_ops(session)
    if outside is None or outside.median <= 0 or not ops:
        return None
    shares = ", ".join(
        f"{op_label(op)} {round(100 * op.self_cpu_us / outside.median)}%" for op in ops
    )
    return f"{shares}: {_sources(session)}"


def heaviest_outside_ops(session: ProfileSession) -> list[OpStat]:
    """The outside row's ops with the most self time (those with none left out)."""
    found = [op for op in session.outside_ops if op.self_cpu_us > 0]
    found.sort(key=lambda op: (-op.self_cpu_us, op.name))
    return found[:SHOWN_OPS]


# What the with-block's own ranges in no layer stand for: their self time is the time on the
# stepping thread between events (the loop's and the forwards' Python, hooks, autograd's engine
# between nodes), which a `run` iteration, having no such range, does not count at all. The names
# are `runtime.events.training_names`'s: the analysis layer cannot import the runtime, and a test
# checks that the two agree.
RANGE_WORDS = {
    "hybridprof::step": "time between ops: Python, autograd's engine",
    "hybridprof::closure": "the closure's time between ops",
}
# An autograd node's event, named by the engine: `<this prefix><Node>`; the note names the node.
_NODE_PREFIX = "autograd::engine::evaluate_function: "


def op_label(op: OpStat) -> str:
    """An op's name as the note says it: an autograd node by its node, a backward op marked as
    such (the forward op of that name is another), a with-block range by what it stands for."""
    name = op.name.removeprefix(_NODE_PREFIX)
    words = RANGE_WORDS.get(name)
    if words is not None:
        return f"{name} ({words})"
    return f"{name} (bwd)" if op.backward else name


def unprofiled_parents(session: ProfileSession) -> list[str]:
    """Parents that run a forward of their own but have no row, so their inline ops are outside.

    Where the planner read the source (`run`), the parents it found running ops directly; a plan
    from the tree alone (the with-block's) has no such findings: then every unselected module
    with children that runs a forward (a container such as ModuleList runs none)."""
    selected = set(session.plan.selected_paths())
    if session.plan.classes:
        doers = {f.path for f in session.plan.findings if f.kind == FindingKind.INLINE_OPS}
        return [
            t.path or session.plan.root_class  # the root's own forward, by its class
            for t in session.plan.targets
            if t.path in doers and t.path not in selected
        ]
    return [
        t.path
        for t in session.plan.targets
        if not t.is_leaf and t.has_forward and not t.selected and t.path
    ]


def _sources(session: ProfileSession) -> str:
    parents = unprofiled_parents(session)
    parts = []
    if parents:
        named = ", ".join(parents[:SHOWN_PARENTS])
        more = f" and {len(parents) - SHOWN_PARENTS} more" if len(parents) > SHOWN_PARENTS else ""
        parts.append(
            f"inline ops of the unprofiled parents {named}{more} (leaves_only=False or "
            "--with-parents gives them rows)"
        )
    parts.append("the code around the model (the loss)")
    if session.backward:
        parts.append("autograd's work for it")
    return ", ".join(parts)


__all__ = [
    "RANGE_WORDS",
    "SHOWN_OPS",
    "heaviest_outside_ops",
    "op_label",
    "outside_note",
    "unprofiled_parents",
]
