"""The compile section of a session in a few lines: what was compiled, what it cost, what broke."""

from __future__ import annotations

from hybridprof.datamodel import CompileSection, ProfileSession
from hybridprof.reporting.format import visible


def compile_lines(session: ProfileSession) -> list[str]:
    """Empty for an eager session."""
    section = session.compiled
    if section is None:
        return []
    where = ", ".join(f"{w.path or '(root)'} ({w.kind})" for w in section.where)
    mode = f", mode {section.mode}" if section.mode else ""
    by = "hybridprof's torch.compile" if section.compiled_by == "hybridprof" else "compiled"
    compile_time = f"{section.compile_s:.2f} s"
    if section.backward_compile_s:
        compile_time += f" + {section.backward_compile_s:.2f} s backward"
    lines = [
        f"{by}: {visible(where)}, backend {visible(section.backend)}{mode}; compile "
        f"{compile_time} in warm-up (in no layer's time), {section.graphs} graph"
        f"{'s' if section.graphs != 1 else ''}, {len(section.graph_breaks)} graph break"
        f"{'s' if len(section.graph_breaks) != 1 else ''}; {_kernels(section)}"
    ]
    for found in section.graph_breaks:
        code = f" `{visible(found.code)}`" if found.code else ""
        modules = _pattern(found.modules) or "compiled code"
        lines.append(
            f"  graph break in {visible(modules)}: {visible(found.reason)}{code} at {found.where()}"
        )
    lines += [f"  recompiled in warm-up: {visible(r)}" for r in section.warmup_recompiles]
    lines += [f"  note: {visible(n)}" for n in section.notes]
    return lines


def compile_header(session: ProfileSession) -> list[tuple[str, str]]:
    """The report header's items about compiling (none for an eager session)."""
    section = session.compiled
    if section is None:
        return []
    where = ", ".join(f"{w.path or '(root)'}: {w.kind}, backend {w.backend}" for w in section.where)
    breaks = len(section.graph_breaks)
    plural = ("s" if section.graphs != 1 else "", "s" if breaks != 1 else "")
    return [
        ("Compiled", where + (f", mode {section.mode}" if section.mode else "")),
        (
            "Compile time",
            f"{section.compile_s:.2f} s in warm-up, in no layer's time ({section.graphs} "
            f"graph{plural[0]}, {breaks} graph break{plural[1]})",
        ),
        ("Kernels", _kernels(section)),
    ]


def _kernels(section: CompileSection) -> str:
    if section.kernel_map == "eager":
        return "no compiled code ran in the measured iterations: the rows are eager times"
    return (
        f"kernels {section.kernel_map} to layers ({section.call_sites} call sites, "
        f"{section.matched_events} events per iteration)"
    )


def compile_notes(session: ProfileSession) -> list[str]:
    """What fused in compiled kernels, and the compile section's notes, as report notes."""
    section = session.compiled
    if section is None:
        return []
    fused = [
        f"compiled kernels of {layer.path or '(root)'} also did the work of: "
        + ", ".join(f.removeprefix(layer.path + ".") if layer.path else f for f in layer.fused)
        for layer in section.layers
        if layer.fused
    ]
    excluded = [
        f"iteration {e.iteration} recompiled and is left out: {e.reason}" for e in section.excluded
    ]
    return [*fused, *excluded, *section.notes]


def _pattern(paths: tuple[str, ...]) -> str:
    if len(paths) <= 1:
        return paths[0] if paths else ""
    split = [p.split(".") for p in paths]
    if len({len(s) for s in split}) == 1:
        return ".".join(
            level[0] if len(set(level)) == 1 else "*" for level in zip(*split, strict=True)
        )
    return ", ".join(paths)


__all__ = ["compile_lines"]
