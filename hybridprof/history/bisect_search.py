"""The halving of `history bisect`: which commit between a good and a bad one made it slower.

The search only asks a judge "is this commit slower than the good one?" and keeps the answers:
the bad commit is asked first (nothing to search when it is not slower), then the middle of
what is still open, as `git bisect` does, so 32 commits take 1 + 5 answers. An answer the
judge cannot give (inconclusive: the interval was too wide to tell) is asked again, the judge
measuring more each time (`attempt` counts up), up to `retries` times; if it still cannot tell,
the search stops there and says which commits are left, rather than guess. Torch-free: the
judge (a paired run of `diff --run --rev` in the CLI) is given.

What a paired run says is read here too. BAD's comparison with GOOD names what to watch: the
layers it finds slower (not knock-on) whose added time is at least `WATCH_SHARE` of the largest
one's, or the layers asked for, or the whole iteration when no layer is slower alone; each with
its step, BAD's paired ratio. A commit in between is then not asked "is it slower beyond the
threshold?" but "which side of the step is it on?": bad when its paired median lies above the
step's geometric middle and its interval excludes GOOD's level (x1), good when the median lies
below the middle and the interval excludes BAD's level, inconclusive otherwise (a test of two
known hypotheses, not of "any change"). BAD's level is the low end of its interval (one run on a
busy machine can read a 3x heavier conv as 8x), the middle the square root of that: x1.6 for a 3x
step measured well. Two levels this far apart are told apart in far fewer pairs than a 5%
threshold needs, so a busy machine rarely makes a commit undecidable.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from hybridprof.diff import Change, DiffResult

Verdict = Literal["bad", "good", "inconclusive"]
# (commit, attempt) -> the verdict and one line of evidence for it
Judge = Callable[[str, int], tuple[Verdict, str]]
DEFAULT_RETRIES = 2
WATCH_SHARE = 0.1  # of the largest regression's added time: smaller ones are not watched
CLEAR_STEP = 1.1  # a step whose interval's low end is under this is watched only if none is over
WHOLE = "(whole iteration)"
UNPAIRED: dict[str, Verdict] = {"slower": "bad", "inconclusive": "inconclusive"}


@dataclass(frozen=True, slots=True)
class Probe:
    """One commit judged: its verdict, the evidence of its last run, and how many runs it took."""

    rev: str
    verdict: Verdict
    evidence: str
    runs: int


@dataclass(frozen=True, slots=True)
class Bisection:
    """What the search found: the first bad commit and the last good one before it (`good` when
    it is the first of the candidates), or why it stopped without one."""

    good: str
    first_bad: str | None
    last_good: str | None
    probes: tuple[Probe, ...]
    stopped: str = ""  # why there is no answer ("" when there is one)
    left: tuple[str, ...] = ()  # the candidates still open when it stopped

    @property
    def runs(self) -> int:
        return sum(p.runs for p in self.probes)

    def probe_of(self, rev: str) -> Probe | None:
        return next((p for p in self.probes if p.rev == rev), None)


def bisect(
    good: str, candidates: Sequence[str], judge: Judge, retries: int = DEFAULT_RETRIES
) -> Bisection:
    """The first of `candidates` (the commits after `good` up to the bad one, oldest first) that
    the judge finds slower than `good`, every later one assumed slower too."""
    probes: list[Probe] = []

    def ask(rev: str) -> Verdict:
        probes.append(_probe(rev, judge, retries))
        return probes[-1].verdict

    if not candidates:
        return Bisection(good, None, None, (), stopped="no commit to search")
    first = ask(candidates[-1])
    if first != "bad":
        why = (
            "the bad commit is not slower than the good one"
            if first == "good"
            else ("the bad commit could not be told from the good one")
        )
        return Bisection(good, None, None, tuple(probes), stopped=why)
    low, high = -1, len(candidates) - 1  # candidates[high] is bad; candidates[low] good
    while high - low > 1:
        middle = (low + high) // 2
        verdict = ask(candidates[middle])
        if verdict == "inconclusive":
            left = tuple(candidates[low + 1 : high + 1])
            why = f"commit {candidates[middle][:10]} could not be told from the good one"
            return Bisection(good, None, None, tuple(probes), stopped=why, left=left)
        if verdict == "bad":
            high = middle
        else:
            low = middle
    last_good = candidates[low] if low >= 0 else good
    return Bisection(good, candidates[high], last_good, tuple(probes))


def _probe(rev: str, judge: Judge, retries: int) -> Probe:
    """Judge `rev`, again with more measuring while the answer is inconclusive."""
    for attempt in range(retries + 1):
        verdict, evidence = judge(rev, attempt)
        if verdict != "inconclusive":
            break
    return Probe(rev, verdict, evidence, attempt + 1)


@dataclass(frozen=True, slots=True)
class Watched:
    """A figure the bisection judges by: a layer's self time (or the whole iteration's), and the
    paired ratio it stepped by between GOOD and BAD."""

    path: str  # WHOLE for the whole iteration
    step: float  # the low end of BAD's paired interval (its median ratio without pairing)
    ratio: float  # BAD's median paired ratio

    @property
    def middle(self) -> float:
        """The boundary between the two sides: the step's geometric middle."""
        return math.sqrt(self.step)


@dataclass(frozen=True, slots=True)
class Side:
    """Where one watched figure of a commit lies: its change against GOOD, and the verdict."""

    watched: Watched
    change: Change | None  # None: the layer is not at this commit
    verdict: Verdict


def to_watch(result: DiffResult, patterns: Sequence[str] = ()) -> tuple[Watched, ...]:
    """What BAD's comparison with GOOD says to watch (nothing: BAD is not slower)."""
    if patterns:
        layers = [x for x in result.layers if any(fnmatch.fnmatchcase(x.path, p) for p in patterns)]
        slower = [x for x in layers if x.verdict == "slower"]
    else:
        slower = list(result.regressions())
        largest = max((x.self_delta() for x in slower), default=0.0)
        slower = [x for x in slower if x.self_delta() >= WATCH_SHARE * largest]
    found = [
        (x.path, _time_change(x.change("self_cpu_us"), x.change("self_device_us"))) for x in slower
    ]
    watched = tuple(_watched(path, change) for path, change in found if change is not None)
    clear = tuple(w for w in watched if w.step >= CLEAR_STEP)
    if clear and not patterns:
        # a figure BAD barely moved (its interval's low end near x1: a knock-on such as the
        # root's glue) cannot be placed on either side of its step, and would leave every commit
        # inconclusive; the clear steps decide
        watched = clear
    if watched or patterns:
        return watched
    if result.total.verdict == "slower":
        return (_watched(WHOLE, result.total),)
    return ()


def _time_change(cpu: Change | None, device: Change | None) -> Change | None:
    return device if device is not None and device.verdict == "slower" else cpu


def _watched(path: str, change: Change) -> Watched:
    if change.paired is not None:
        return Watched(path, change.paired.low, change.paired.ratio)
    ratio = change.ratio if change.ratio is not None else math.inf
    return Watched(path, ratio, ratio)


def sides(result: DiffResult, watched: Sequence[Watched]) -> list[Side]:
    """Each watched figure of a commit's comparison with GOOD, on its side of the step."""
    found = []
    for watch in watched:
        change = result.total if watch.path == WHOLE else _layer_change(result, watch.path)
        found.append(Side(watch, change, _side(change, watch)))
    return found


def _layer_change(result: DiffResult, path: str) -> Change | None:
    layer = next((x for x in result.layers if x.path == path), None)
    if layer is None:
        return None
    return layer.change("self_cpu_us") or layer.change("self_device_us")


def _side(change: Change | None, watch: Watched) -> Verdict:
    if change is None:
        return "inconclusive"
    if change.paired is None:  # not paired: the comparison's own verdict
        return UNPAIRED.get(change.verdict, "good")
    paired = change.paired
    if paired.ratio >= watch.middle and paired.low > 1.0:
        return "bad"
    if paired.ratio < watch.middle and paired.high < watch.step:
        return "good"
    return "inconclusive"


def verdict_of(found: Sequence[Side]) -> Verdict:
    """Bad when any watched figure is on the bad side, good when all are on the good side."""
    verdicts = {side.verdict for side in found}
    if "bad" in verdicts:
        return "bad"
    return "good" if verdicts == {"good"} else "inconclusive"


__all__ = [
    "DEFAULT_RETRIES",
    "WHOLE",
    "Bisection",
    "Judge",
    "Probe",
    "Side",
    "Verdict",
    "Watched",
    "bisect",
    "sides",
    "to_watch",
    "verdict_of",
]
