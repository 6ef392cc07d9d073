"""The halving of `history bisect` with a judge whose answers are known: how many answers it
takes, what it does with an inconclusive one, and how a paired comparison is read (what to
watch at BAD, which side of the step a commit is on)."""

from __future__ import annotations

import math

import pytest

from hybridprof.diff import Change, DiffResult, LayerDiff, PairedRatio, RunIdentity
from hybridprof.history.bisect_search import (
    WHOLE,
    Verdict,
    Watched,
    bisect,
    sides,
    to_watch,
    verdict_of,
)

COMMITS = [f"c{i:02d}" for i in range(1, 32)]  # the 31 commits after GOOD


def judge_with(first_bad: int, unsure: dict[str, int] | None = None):  # type: ignore[no-untyped-def]
    """Bad from `first_bad` on; `unsure`: commits that answer inconclusive that many times."""
    asked: list[tuple[str, int]] = []
    unsure = dict(unsure or {})

    def judge(rev: str, attempt: int) -> tuple[Verdict, str]:
        asked.append((rev, attempt))
        if unsure.get(rev, 0) > attempt:
            return "inconclusive", "wide"
        return ("bad" if COMMITS.index(rev) >= first_bad else "good"), "known"

    return judge, asked


@pytest.mark.parametrize("first_bad", range(len(COMMITS)))
def test_31_commits_take_at_most_6_answers(first_bad: int) -> None:
    judge, asked = judge_with(first_bad)
    found = bisect("good", COMMITS, judge)
    assert found.first_bad == COMMITS[first_bad]
    assert found.last_good == (COMMITS[first_bad - 1] if first_bad else "good")
    assert asked[0] == (COMMITS[-1], 0) and found.runs == len(asked) <= 1 + math.ceil(math.log2(31))


def test_an_inconclusive_commit_is_measured_again_then_the_search_stops() -> None:
    judge, asked = judge_with(20, unsure={COMMITS[14]: 1})
    found = bisect("good", COMMITS, judge, retries=2)
    assert found.first_bad == COMMITS[20]
    assert (COMMITS[14], 1) in asked and found.probe_of(COMMITS[14]).runs == 2  # type: ignore[union-attr]
    judge, asked = judge_with(20, unsure={COMMITS[14]: 9})
    stopped = bisect("good", COMMITS, judge, retries=2)
    assert stopped.first_bad is None and "could not be told" in stopped.stopped
    assert stopped.left == tuple(COMMITS)  # nothing was decided below the bad commit yet
    assert [a for r, a in asked if r == COMMITS[14]] == [0, 1, 2]


def test_a_bad_commit_that_is_not_slower_ends_the_search_at_once() -> None:
    judge, asked = judge_with(99)
    found = bisect("good", COMMITS, judge)
    assert found.first_bad is None and asked == [(COMMITS[-1], 0)]
    assert found.stopped == "the bad commit is not slower than the good one"


IDENTITY = RunIdentity(
    "x", None, None, "", "0", "2.13", "3.11", "cpu", "cpu", 1, "session", 30, "stable"
)


def change(ratio: float, low: float, high: float, verdict: str = "slower") -> Change:
    paired = PairedRatio(ratio, low, high, 30)
    return Change(
        "self_cpu_us",
        100.0,
        100.0 * ratio,
        100.0 * (ratio - 1),
        ratio,
        paired=paired,
        verdict=verdict,
    )  # type: ignore[arg-type]


def result(layers: dict[str, Change], total: Change | None = None) -> DiffResult:
    diffs = tuple(
        LayerDiff(p, p, "Conv2d", "path", c.verdict, times=(c,))  # type: ignore[arg-type]
        for p, c in layers.items()
    )
    whole = total or change(1.0, 0.98, 1.02, "within noise")
    return DiffResult(IDENTITY, IDENTITY, 5.0, "m", whole, diffs)


def test_bad_names_what_to_watch_and_each_commit_is_placed_against_its_middle() -> None:
    at_bad = result(
        {
            "conv": change(3.0, 2.8, 3.3),
            "act": change(1.02, 0.99, 1.05, "within noise"),
            "": change(1.06, 1.05, 1.08),  # slower, but 6 us against conv's 200: not watched
        }
    )
    (watched,) = to_watch(at_bad)
    assert watched == Watched("conv", 2.8, 3.0) and watched.middle == pytest.approx(math.sqrt(2.8))
    good = sides(result({"conv": change(1.05, 0.9, 1.3, "inconclusive")}), [watched])
    bad = sides(result({"conv": change(2.9, 2.1, 3.8)}), [watched])
    wide_good = sides(result({"conv": change(0.95, 0.8, 2.0, "inconclusive")}), [watched])
    wide_bad = sides(result({"conv": change(2.5, 1.1, 5.0)}), [watched])
    unsure = sides(result({"conv": change(1.4, 0.9, 2.9)}), [watched])
    gone = sides(result({}), [watched])
    found = [verdict_of(x) for x in (good, bad, wide_good, wide_bad, unsure, gone)]
    assert found == ["good", "bad", "good", "bad", "inconclusive", "inconclusive"]


def test_without_a_slower_layer_the_whole_iteration_is_watched() -> None:
    slower_total = change(1.5, 1.3, 1.7)
    (watched,) = to_watch(result({"conv": change(1.02, 0.9, 1.1, "within noise")}, slower_total))
    assert watched.path == WHOLE
    assert to_watch(result({"conv": change(1.0, 0.9, 1.1, "within noise")})) == ()
    assert to_watch(result({"conv": change(3.0, 2.8, 3.3)}), ["act"]) == ()  # asked, not slower


def test_a_figure_bad_barely_moved_is_not_watched_beside_a_clear_step() -> None:
    """The root's self time x1.53 [1.04, 1.84] beside a conv x3.6 [2.5, 4.2] (seen on a busy
    machine): watching the root left a good commit inconclusive in 3 runs of 120 pairs (a good
    side needs its interval under x1.04); the conv alone decides."""
    at_bad = result({"conv": change(3.6, 2.54, 4.17), "": change(1.53, 1.04, 1.84)})
    (watched,) = to_watch(at_bad)
    assert watched.path == "conv"
    good = sides(
        result({"conv": change(1.02, 0.97, 1.14), "": change(0.98, 0.94, 1.10)}), [watched]
    )
    assert verdict_of(good) == "good"
    # alone, a small step is still watched: it is all there is
    (only,) = to_watch(result({"": change(1.53, 1.04, 1.84)}))
    assert only.path == ""
