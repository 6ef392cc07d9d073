"""Hand-made ProfileSessions with fixed numbers, for reporter tests and benchmarks.

Every factory returns a real `ProfileSession` (no torch needed), so frames, templates and files can
be checked against numbers known in advance.
"""

from __future__ import annotations

from hybridprof.datamodel import (
    CompatChoice,
    Environment,
    Finding,
    FindingKind,
    ModuleRecord,
    ModuleTarget,
    OpStat,
    ProfilePlan,
    ProfileSession,
    SourceSpan,
    Stat,
)

HOSTILE = "<img src=x onerror=alert(1)>"

ENV = Environment(
    hybridprof_version="0.1.0",
    torch_version="2.13.0+cpu",
    python_version="3.11.9",
    os="Linux-6.1",
    cpu="Test CPU @ 2.0GHz",
    threads=1,
    device="cpu",
)

COMPAT = (
    CompatChoice("profiler_device_arg", "use_device", "torch 2.13 accepts use_device"),
    CompatChoice("raw_events", "kineto", "kineto_results.events() is readable"),
)


def target(path: str, cls: str, leaf: bool = True, line: int = 10, params: int = 0) -> ModuleTarget:
    depth = 0 if path == "" else path.count(".") + 1
    return ModuleTarget(
        path=path,
        class_name=cls,
        qualname=f"torch.nn.{cls}",
        depth=depth,
        is_leaf=leaf,
        selected=leaf,
        reason="leaf" if leaf else "not a leaf",
        source=SourceSpan("nets.py", line),
        param_count=params,
    )


def op(
    name: str, calls: int, self_us: float, total_us: float, mem: int = 0, bwd: bool = False
) -> OpStat:
    return OpStat(name, calls, self_us, total_us, self_cpu_mem=mem, cpu_mem=mem, backward=bwd)


def record(path: str, cls: str, self_us: float, total_us: float, **kw: object) -> ModuleRecord:
    spread = kw.pop("spread", 0.1)
    assert isinstance(spread, float)
    return ModuleRecord(
        path=path,
        class_name=cls,
        calls=int(kw.pop("calls", 3)),  # type: ignore[call-overload]
        self_cpu_us=Stat(self_us, self_us * (1 - spread), self_us * (1 + spread)),
        total_cpu_us=Stat(total_us, total_us * (1 - spread), total_us * (1 + spread)),
        **kw,  # type: ignore[arg-type]
    )


def _session(plan: ProfilePlan, records: tuple[ModuleRecord, ...], **kw: object) -> ProfileSession:
    defaults: dict[str, object] = {
        "strategy": "session",
        "warmup": 2,
        "iterations": 3,
        "requested_iterations": 3,
        "iteration_cpu_us": (1000.0, 1010.0, 990.0),
        "model_file": "nets.py",
        "started_at": "2026-11-30T11:00:00Z",
    }
    defaults.update(kw)
    return ProfileSession(plan=plan, environment=ENV, records=records, **defaults)  # type: ignore[arg-type]


def _plan(root: str, targets: tuple[ModuleTarget, ...], **kw: object) -> ProfilePlan:
    return ProfilePlan(
        root_class=root,
        targets=targets,
        compat=COMPAT,
        model_file="nets.py",
        entry="make_net",
        torch_version="2.13.0+cpu",
        **kw,  # type: ignore[arg-type]
    )


def small_session() -> ProfileSession:
    """Root Net with three leaves: fc1 (Linear), act (ReLU), fc2 (Linear); totals add to 1 ms."""
    targets = (
        target("", "Net", leaf=False, line=5),  # own parameters only, as module_tree counts
        target("fc1", "Linear", line=8, params=1000),
        target("act", "ReLU", line=9),
        target("fc2", "Linear", line=10, params=200),
    )
    ops1 = (op("aten::addmm", 3, 500.0, 550.0, mem=4096), op("aten::t", 3, 20.0, 30.0))
    records = (
        record("fc1", "Linear", 520.0, 580.0, ops=ops1, param_count=1000, output_shapes=("4x64",)),
        record("act", "ReLU", 100.0, 100.0, ops=(op("aten::relu", 3, 100.0, 100.0),)),
        record(
            "fc2",
            "Linear",
            300.0,
            320.0,
            ops=(op("aten::addmm", 3, 300.0, 320.0),),
            param_count=200,
        ),
    )
    return _session(_plan("Net", targets), records)


def nested_session() -> ProfileSession:
    """Two blocks of two leaves each, plus the blocks and the root profiled too (non-leaf
    records)."""
    targets = [target("", "Net", leaf=False)]
    records = [record("", "Net", 50.0, 1000.0, is_leaf=False)]
    for b in range(2):
        targets.append(target(f"blocks.{b}", "Block", leaf=False, line=20 + b))
        records.append(record(f"blocks.{b}", "Block", 30.0, 470.0, is_leaf=False))
        for name, cls, t in (("conv", "Conv2d", 340.0), ("act", "ReLU", 100.0)):
            path = f"blocks.{b}.{name}"
            targets.append(target(path, cls, line=30 + b))
            records.append(record(path, cls, t, t, ops=(op("aten::conv2d", 1, t, t),)))
    findings = (
        Finding(
            FindingKind.INLINE_OPS,
            "blocks.0",
            "Block.forward calls torch.flatten inline",
            SourceSpan("nets.py", 44),
        ),
        Finding(
            FindingKind.NEVER_CALLED,
            "blocks.1.unused",
            "unused is created but never called in forward",
        ),
        Finding(FindingKind.ALIAS, "blocks.1.act", "same module as blocks.0.act"),
    )
    return _session(
        _plan("Net", tuple(targets), findings=findings),
        tuple(records),
        never_called=("head",),
        warnings=("iteration 1 was 30% slower than the median",),
    )


def backward_session() -> ProfileSession:
    """The small session with backward times and backward ops."""
    base = small_session()
    recs = tuple(
        _with(r, backward_self_cpu_us=Stat(2 * r.self_cpu_us.median, 0.0, 3 * r.self_cpu_us.median))
        for r in base.records
    )
    recs = (
        _with(recs[0], ops=(*recs[0].ops, op("aten::mm", 3, 900.0, 900.0, bwd=True))),
        *recs[1:],
    )
    return _session(base.plan, recs, backward=True)


def device_session() -> ProfileSession:
    base = small_session()
    recs = tuple(
        _with(
            r,
            self_device_us=Stat(r.self_cpu_us.median / 2, 1.0, 999.0),
            total_device_us=r.total_cpu_us,
        )
        for r in base.records
    )
    return _session(base.plan, recs, use_device=True)


def memory_session() -> ProfileSession:
    base = small_session()
    recs = tuple(
        _with(r, self_cpu_mem=3 * 1024 * 1024, cpu_mem=4 * 1024 * 1024) for r in base.records
    )
    return _session(base.plan, recs, profile_memory=True)


def hostile_session() -> ProfileSession:
    """A child named like an HTML injection (legal through add_module) and a hostile class name."""
    path = HOSTILE
    targets = (target("", "Net", leaf=False), target(path, "Evil</script><b>"))
    rec = record(path, "Evil</script><b>", 10.0, 10.0, ops=(op(f"aten::{HOSTILE}", 1, 10.0, 10.0),))
    finding = Finding(
        FindingKind.INLINE_OPS, path, f"{HOSTILE} calls ops inline", SourceSpan("<x>.py", 1)
    )
    return _session(_plan("Net", targets, findings=(finding,)), (rec,), warnings=(HOSTILE,))


def big_session(leaves: int = 2000, per_block: int = 10, ops_per_leaf: int = 4) -> ProfileSession:
    """`leaves` leaves in blocks of `per_block` (blocks.i.layers.j), each with a few ops."""
    targets = [target("", "Big", leaf=False)]
    records: list[ModuleRecord] = []
    for b in range((leaves + per_block - 1) // per_block):
        targets.append(target(f"blocks.{b}", "Block", leaf=False))
        targets.append(target(f"blocks.{b}.layers", "Sequential", leaf=False))
        for j in range(min(per_block, leaves - b * per_block)):
            path = f"blocks.{b}.layers.{j}"
            cls = ("Linear", "ReLU", "LayerNorm")[j % 3]
            t = 5.0 + (b * per_block + j) % 97
            ops = tuple(
                op(f"aten::op{k}", 1, t / ops_per_leaf, t / ops_per_leaf)
                for k in range(ops_per_leaf)
            )
            targets.append(target(path, cls, line=100 + j, params=64 * j))
            records.append(
                record(path, cls, t, t, ops=ops, param_count=64 * j, output_shapes=("8x64",))
            )
    total = sum(r.total_cpu_us.median for r in records)
    return _session(_plan("Big", tuple(targets)), tuple(records), iteration_cpu_us=(total,))


def _with(rec: ModuleRecord, **changes: object) -> ModuleRecord:
    import dataclasses

    return dataclasses.replace(rec, **changes)  # type: ignore[arg-type]
