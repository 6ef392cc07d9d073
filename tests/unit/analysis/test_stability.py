"""The stability verdict from given figures: each rule, and the advice it gives."""

from __future__ import annotations

import dataclasses

from hybridprof.analysis.stability import assess

STEADY = [1000.0, 1010.0, 995.0, 1005.0, 990.0, 1002.0]
SPREAD = [1000.0, 1400.0, 800.0, 1900.0, 950.0, 1200.0]


def test_a_quiet_machine_and_steady_iterations_are_stable() -> None:
    stability = assess(STEADY, threads=1, cores=2, load_average=0.2, other_runnable=0.0)
    assert stability.verdict == "stable"
    assert stability.advice == ""
    assert stability.load == 0.1
    assert stability.threads == 1
    assert 0 < stability.iteration_cv < 0.02


def test_two_busy_processes_with_default_threads_on_two_cores_are_noisy() -> None:
    stability = assess(STEADY, threads=2, cores=2, load_average=2.1, other_runnable=2.0)
    assert stability.verdict == "noisy"
    assert "--threads 1" in stability.advice
    assert "background jobs" in stability.advice
    assert "other work used 2.0 of the 2 cores, torch ran 2 threads" in stability.advice
    assert stability.threads_exceed_free_cores
    # One short line in one unit (cores): no runnable-task counts beside a load per core.
    assert "runnable" not in stability.advice and "per core" not in stability.advice
    assert "\n" not in stability.advice and len(stability.advice) < 120


def test_one_thread_never_counts_as_threads_exceeding_the_free_cores() -> None:
    stability = assess(STEADY, threads=1, cores=2, load_average=3.0, other_runnable=3.0)
    assert stability.verdict == "noisy" and not stability.threads_exceed_free_cores


def test_other_work_that_leaves_a_core_for_one_thread_is_stable() -> None:
    stability = assess(STEADY, threads=1, cores=2, load_average=1.0, other_runnable=1.0)
    assert stability.verdict == "stable"


def test_one_other_job_and_two_threads_oversubscribe_two_cores() -> None:
    stability = assess(STEADY, threads=2, cores=2, load_average=1.0, other_runnable=1.0)
    assert stability.verdict == "noisy"
    assert "--threads 1" in stability.advice
    assert "background" not in stability.advice  # one thread would fit beside the other job


def test_widely_spread_iterations_are_noisy_even_on_a_quiet_machine() -> None:
    stability = assess(SPREAD, threads=1, cores=8, load_average=0.0, other_runnable=0.0)
    assert stability.verdict == "noisy"
    assert stability.iteration_cv > 0.10
    assert "--iters auto" in stability.advice
    assert "vary by" in stability.advice


def test_a_run_that_chose_its_iterations_is_told_to_take_longer() -> None:
    stability = assess(
        SPREAD, threads=1, cores=8, load_average=0.0, other_runnable=0.0, iters_auto=True
    )
    assert "longer --max-time" in stability.advice
    assert "run more iterations" not in stability.advice


def test_the_load_average_stands_in_when_runnable_tasks_were_not_sampled() -> None:
    busy = assess(STEADY, threads=2, cores=2, load_average=2.0, other_runnable=None)
    quiet = assess(STEADY, threads=2, cores=2, load_average=0.1, other_runnable=None)
    assert (busy.verdict, quiet.verdict) == ("noisy", "stable")


def test_a_single_iteration_is_judged_by_the_machine_alone() -> None:
    assert assess([500.0], threads=1, cores=2, load_average=None, other_runnable=0.0).verdict == (
        "stable"
    )
    stability = assess([500.0], threads=4, cores=4, load_average=None, other_runnable=3.0)
    assert stability.verdict == "noisy"
    assert stability.iteration_cv == 0.0
    assert stability.load == 0.0  # no load average on this OS


def test_the_object_has_exactly_the_documented_fields() -> None:
    stability = assess(STEADY, threads=1, cores=2, load_average=0.5, other_runnable=0.0)
    assert [f.name for f in dataclasses.fields(stability)] == [
        "verdict",
        "iteration_cv",
        "load",
        "threads",
        "advice",
        "threads_exceed_free_cores",
    ]
