"""Number formatting shared by every renderer (torchprof's units: us/ms/s and B/KB/MB/GB; FLOP
counts and rates in steps of 1000), and names made safe to print."""

from __future__ import annotations

import re

from hybridprof.datamodel import MachinePeak, ProfileSession


def format_time_us(us: float) -> str:
    """1.832ms, 51.858us, 2.100s — three decimals, the unit chosen by size, as torchprof printed."""
    if us >= 1_000_000:
        return f"{us / 1_000_000:.3f}s"
    if us >= 1_000:
        return f"{us / 1_000:.3f}ms"
    return f"{us:.3f}us"


def format_bytes(n: int | float) -> str:
    """-1.50 MB, 512 B, 3.25 KB (powers of 1024; memory deltas can be negative)."""
    sign = "-" if n < 0 else ""
    value = float(abs(n))
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{sign}{int(value)} {unit}" if unit == "B" else f"{sign}{value:.2f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_percent(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole > 0 else "-"


def format_calls(calls: float) -> str:
    """3, or 2.5 when calls differ between iterations (a branch taken sometimes)."""
    return str(int(calls)) if float(calls).is_integer() else f"{calls:.1f}"


def format_count(value: float, unit: str) -> str:
    """1.43e9 -> '1.43 G' + unit (k, M, G, T steps of 1000)."""
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def format_rate(value: float | None, unit: str) -> str:
    return "-" if value is None else f"{value:.3g} {unit}"


def flops_total_text(session: ProfileSession) -> str:
    """`FLOPs per step: 176 MFLOP forward+backward (58.5 MFLOP forward, 117 MFLOP backward)`, or
    `FLOPs per step: 58.5 MFLOP forward`; empty without --flops."""
    work = session.flops
    if work is None:
        return ""
    forward = format_count(work.forward_flops, "FLOP")
    if not session.backward:
        return f"FLOPs per step: {forward} forward"
    both = format_count(work.forward_flops + work.backward_flops, "FLOP")
    backward = format_count(work.backward_flops, "FLOP")
    return f"FLOPs per step: {both} forward+backward ({forward} forward, {backward} backward)"


def peak_text(peak: MachinePeak) -> str:
    return (
        f"peak {peak.gflops:.4g} GFLOP/s and {peak.gbps:.4g} GB/s ({peak.source}; {peak.how}); "
        f"ridge point {peak.gflops / peak.gbps:.3g} FLOP/byte"
        if peak.gbps > 0
        else f"peak {peak.gflops:.4g} GFLOP/s ({peak.source})"
    )


# Characters a terminal or editor acts on instead of showing: C0/C1 controls (ESC starts colour and
# title sequences, CR rewrites the line), and the invisible and bidirectional marks that make text
# read differently from what it is: zero-width and bidi overrides and isolates, the Arabic letter
# mark (U+061C), the Mongolian vowel separator (U+180E), and the tag characters (U+E0000-E007F,
# invisible letters that can smuggle text). Module names come from user models and session files.
_HIDDEN = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff"
    "\U000e0000-\U000e007f]"
)
_HIDDEN_OR_NEWLINE = re.compile(_HIDDEN.pattern[:-1] + "\n]")


def visible(text: str, newlines: bool = False) -> str:
    """`text` with each such character written as its Python escape (`\\x1b`, `\\r`, `\\u202e`).

    `newlines=True` keeps line breaks (for whole reports); a cell or a name escapes them too.
    """
    pattern = _HIDDEN if newlines else _HIDDEN_OR_NEWLINE
    return pattern.sub(_escaped, text)


def visible_lines(lines: list[str]) -> str:
    """Lines joined into one text, each made `visible`: a newline inside a line (a module name
    holding one) is shown escaped, so it cannot start a forged line of its own."""
    return "\n".join(visible(line) for line in lines)


def _escaped(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def installed_version() -> str:
    """hybridprof's installed version, from its package metadata: the package's own `__version__`
    sits on the floor above reporting/, and the pages stamp the version they were made by."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hybridprof")
    except PackageNotFoundError:
        return "unknown"
