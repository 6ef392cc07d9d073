"""The gate's answer (`hybridprof diff --fail-on-regression`): regression (exit 1), pass (exit 0)
or inconclusive (exit 5), with its reasons (no torch).

A gate that can only say yes or no must guess when the measurements cannot tell, and a CI gate
that guesses "regression" on an unchanged model gets switched off. So it says "inconclusive"
whenever the comparison cannot answer:

- separate runs (saved sessions) of which one is noisy, interrupted or too short: each run's
  intervals describe only its own iterations, and a noisy machine moves two runs made minutes
  apart as a whole and in part, so no verdict of theirs is trusted, a "slower" one included;
- paired runs that could not be paired (the two sides hold different iteration counts, too few
  pairs) or were interrupted (Ctrl-C, SIGTERM: the pairs done are shown, but a gate stopped
  part-way has not answered); their reasons are the pairing's own, never the separate runs'
  (a paired run is already what that advice asks for);
- a layer, or the whole iteration, whose interval is wider than the threshold and still reaches a
  regression beyond the threshold and the min-delta floor (verdict "inconclusive"), or whose
  verdict is "unknown" (no per-iteration values) while its change could reach the floor.

In a paired run a noisy machine is no reason of its own: pairing took the drift out, and what
noise is left widens the paired intervals, which the last rule sees. A regression found there
(its interval excludes no change, beyond the threshold and the floor) is a regression however busy
the machine was.
"""

from __future__ import annotations

from collections.abc import Sequence

from hybridprof.datamodel import ProfileSession
from hybridprof.diff.result import Change, DiffResult, Gate, LayerDiff

RUN_AGAIN = "run again on a quieter machine or with more iterations"
_NAMED = 5  # layers named in a reason


def decide(
    result: DiffResult, base: ProfileSession, new: ProfileSession, unpaired: str | None
) -> Gate:
    """The answer for `result`, compared from `base` and `new`; `unpaired`: why a paired run
    could not be judged pair by pair (None: it could, or the runs were never paired)."""
    if result.pairing is not None:
        untrusted = _unpaired_run(result, base, new, unpaired)
    else:
        untrusted = _untrusted_runs(base, new)
    regression = _regressions(result)
    if untrusted:
        seen = f"; untrusted, it would read: {'; '.join(regression)}" if regression else ""
        return Gate("inconclusive", (*untrusted, f"{RUN_AGAIN}{seen}"))
    if regression:
        return Gate("regression", tuple(regression))
    open_ = _undecided(result)
    if open_:
        return Gate("inconclusive", (*open_, RUN_AGAIN))
    return Gate("pass", ("no layer and not the whole iteration slower beyond the threshold",))


def _untrusted_runs(base: ProfileSession, new: ProfileSession) -> list[str]:
    """Why separate runs' verdicts cannot be trusted: noisy, interrupted or too short runs."""
    reasons = []
    for name, session in (("base", base), ("new", new)):
        stability = session.stability
        if stability is not None and stability.verdict == "noisy":
            reasons.append(
                f"the {name} run is noisy (iteration CV {stability.iteration_cv:.0%}, load "
                f"{stability.load:g} per core), and separate runs on a noisy machine differ "
                "beyond what their intervals see; compare with hybridprof diff --run"
            )
        if session.interrupted:
            reasons.append(f"the {name} run was interrupted")
    return reasons


def _unpaired_run(
    result: DiffResult, base: ProfileSession, new: ProfileSession, unpaired: str | None
) -> list[str]:
    """Why a paired run's pairs cannot answer: it was stopped, or could not be paired."""
    reasons = []
    pairing = result.pairing
    if base.interrupted or new.interrupted or (pairing and pairing.stop_reason == "interrupted"):
        pairs = pairing.pairs if pairing is not None else 0
        reasons.append(f"the paired run was interrupted after {pairs} pair(s)")
    if unpaired is not None:
        reasons.append(unpaired)
    return reasons


def _regressions(result: DiffResult) -> list[str]:
    reasons = []
    if result.total.verdict == "slower":
        reasons.append(f"the whole iteration is slower ({_pct(result.total)})")
    slower = result.regressions()
    if slower:
        reasons.append(f"{len(slower)} layer(s) slower: {_names(slower)}")
    return reasons


def _undecided(result: DiffResult) -> list[str]:
    reasons = []
    if result.total.verdict == "inconclusive":
        reasons.append(
            "the whole iteration's interval is wider than the threshold "
            f"({_interval_pct(result.total)})"
        )
    wide = result.undecided()
    if wide:
        reasons.append(
            f"{len(wide)} layer(s) with an interval wider than the threshold that reaches a "
            f"regression: {_names(wide)}"
        )
    unknown = [x for x in result.layers if x.verdict == "unknown" and _could_count(x, result)]
    if unknown or result.total.verdict == "unknown":
        reasons.append(
            "no interval for "
            + (_names(unknown) if unknown else "the whole iteration")
            + " (too few iterations, or no per-iteration values in the files)"
        )
    return reasons


def _could_count(layer: LayerDiff, result: DiffResult) -> bool:
    """An unknown layer matters when its time is at least the floor (a change could reach it)."""
    found = layer.change("self_cpu_us")
    if found is None:
        return False
    return max(found.base or 0.0, found.new or 0.0) >= result.min_delta_us


def _names(layers: Sequence[LayerDiff]) -> str:
    shown = ", ".join(
        f"{x.path or '(root)'} ({_pct(x.change('self_cpu_us'))})" for x in layers[:_NAMED]
    )
    return shown + (f" and {len(layers) - _NAMED} more" if len(layers) > _NAMED else "")


def _pct(change: Change | None) -> str:
    if change is None:
        return "-"
    if change.paired is not None:
        return f"{change.paired.pct():+.0f}% over {change.paired.pairs} pairs"
    pct = change.delta_pct()
    return "-" if pct is None else f"{pct:+.0f}%"


def _interval_pct(change: Change) -> str:
    if change.low is None or change.high is None or not change.base:
        return "no interval"
    return f"{100 * change.low / change.base:+.0f}% to {100 * change.high / change.base:+.0f}%"


__all__ = ["RUN_AGAIN", "decide"]
