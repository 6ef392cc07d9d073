"""Is a run's timing trustworthy? The session's `stability` verdict and the advice that goes with
it.

Two things make per-layer times lie on a CPU: iterations that spread widely (whatever the cause),
and a machine with more runnable work than cores, where torch's OpenMP threads wait for each other
and small layers read many times their real time (docs/trust.md). The second is judged from the
other work that was
runnable while the model ran (sampled between iterations, our own threads left out; the 1-minute
load average where that cannot be read) plus torch's threads, against the cores this process may
use. Pure figures in, a `Stability` out: no torch, so it is tested with given numbers.
"""

from __future__ import annotations

from collections.abc import Sequence

from hybridprof.analysis.stats import coefficient_of_variation
from hybridprof.datamodel import Stability

NOISY_CV = 0.10  # iteration times spreading more than this (std/mean) make the run noisy
# Other work + threads may exceed the cores by this much before the machine counts as
# oversubscribed: the sampled count of runnable tasks includes short-lived processes (a shell, `ps`)
# now and then.
OVERSUBSCRIBED_MARGIN = 0.5


def assess(
    iteration_us: Sequence[float],
    *,
    threads: int,
    cores: int,
    load_average: float | None,
    other_runnable: float | None,
    iters_auto: bool = False,
) -> Stability:
    """The verdict on one run.

    iteration_us: whole-iteration times; threads: torch's intra-op threads; cores: the CPUs this
    process may run on; load_average: the 1-minute load average (None where the OS has none);
    other_runnable: the mean count of other runnable tasks while the model ran (None: not sampled);
    iters_auto: the run already chose its iteration count (`--iters auto`), so the advice for a wide
    spread is a longer time limit rather than more iterations.
    """
    cores = max(cores, 1)
    cv = coefficient_of_variation(iteration_us)
    other = other_runnable if other_runnable is not None else (load_average or 0.0)
    oversubscribed = other + threads > cores + OVERSUBSCRIBED_MARGIN
    spread = cv > NOISY_CV
    load = (load_average or 0.0) / cores
    more = (
        "give --iters auto a longer --max-time"
        if iters_auto
        else "run more iterations (--iters auto)"
    )
    advice = _advice(cv, spread, oversubscribed, other, threads, cores, more)
    return Stability(
        verdict="noisy" if spread or oversubscribed else "stable",
        iteration_cv=round(cv, 4),
        load=round(load, 2),
        threads=threads,
        advice=advice,
        threads_exceed_free_cores=oversubscribed and threads > 1,
    )


def _advice(
    cv: float,
    spread: bool,
    oversubscribed: bool,
    other: float,
    threads: int,
    cores: int,
    more_iterations: str,
) -> str:
    """Why the run is noisy and what to change, in one short line and one unit (cores), or empty
    when it is not: `other work used 1.9 of the 2 cores, torch ran 2 threads: use --threads 1,
    stop background jobs`."""
    causes: list[str] = []
    fixes: list[str] = []
    if oversubscribed:
        plural = "s" if cores != 1 else ""
        used = f"other work used {min(other, cores):.1f} of the {cores} core{plural}"
        causes.append(used + (f", torch ran {threads} threads" if threads > 1 else ""))
        if threads > 1:
            fixes.append("use --threads 1")
        if other + 1 > cores:
            fixes.append("stop background jobs")
    if spread:
        causes.append(f"iteration times vary by {100 * cv:.0f}%")
        fixes.append(more_iterations)
        if threads > 1 and not oversubscribed:
            fixes.append("use --threads 1")
    if not causes:
        return ""
    return "; ".join(causes) + ": " + ", ".join(fixes)


__all__ = ["NOISY_CV", "OVERSUBSCRIBED_MARGIN", "assess"]
