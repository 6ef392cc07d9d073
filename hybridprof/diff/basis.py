"""Which figures two runs are compared on: both compensated (each run's profiler cost out,
`analysis.compensation`) when both carry a calibration, else both raw, as measured. A compensated
run against a raw one would count the profiler's cost as a slowdown (or a speedup), so one lone
calibration is dropped, and a note says which figures were compared. A run calibrated before
schema 13 moved no call's dispatch into its layer (`Calibration.call_us`); against a later one,
neither moves it, or each small layer would read about 0.8 us a call slower for the move alone."""

from __future__ import annotations

from dataclasses import dataclass, replace

from hybridprof.analysis.layer_table import compensation_of
from hybridprof.datamodel import ProfileSession

FIGURES = "figures compared: "  # how the note starts (`basis_note` finds it among the notes)


@dataclass(frozen=True, slots=True)
class Basis:
    """The two sessions as compared, and the note that says on which figures."""

    base: ProfileSession
    new: ProfileSession
    compensated: bool
    note: str


def like_with_like(base: ProfileSession, new: ProfileSession) -> Basis:
    """`base` and `new` on the same footing: both compensated, or both raw (see the module)."""
    base, new = _same_dispatch_rule(base, new)
    base_fixed, new_fixed = compensation_of(base), compensation_of(new)
    if base_fixed is not None and new_fixed is not None:
        # Their costs are out already: without the calibration no table takes them out twice.
        note = f"{FIGURES}compensated (the profiler's calibrated cost out of both runs)"
        base_out = replace(base_fixed.session, calibration=None)
        new_out = replace(new_fixed.session, calibration=None)
        return Basis(base_out, new_out, True, note)
    lacking = [name for name, s in (("base", base), ("new", new)) if s.calibration is None]
    note = (
        f"{FIGURES}raw, as measured ({' and '.join(lacking)} "
        f"{'has' if len(lacking) == 1 else 'have'} no calibration, so neither is compensated)"
    )
    return Basis(replace(base, calibration=None), replace(new, calibration=None), False, note)


def _same_dispatch_rule(
    base: ProfileSession, new: ProfileSession
) -> tuple[ProfileSession, ProfileSession]:
    """Both runs with each call's dispatch moved into its layer, or neither (one calibrated
    before the move was measured)."""
    if base.calibration is None or new.calibration is None:
        return base, new
    if (base.calibration.call_us > 0) == (new.calibration.call_us > 0):
        return base, new

    def unmoved(session: ProfileSession) -> ProfileSession:
        assert session.calibration is not None
        return replace(session, calibration=replace(session.calibration, call_us=0.0))

    return unmoved(base), unmoved(new)


def basis_note(notes: tuple[str, ...]) -> str | None:
    """Which figures a comparison was made on, from its notes (None: a file from before)."""
    return next((n for n in notes if n.startswith(FIGURES)), None)


__all__ = ["FIGURES", "Basis", "basis_note", "like_with_like"]
