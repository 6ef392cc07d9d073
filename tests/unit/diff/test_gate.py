"""The gate's answer (`hybridprof.diff.gate`): regression, pass or inconclusive, and its exit
codes (`hybridprof.cli.diff.exit_code`), on hand-made sessions of known noise and changes."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

from hybridprof.cli.diff import exit_code
from hybridprof.datamodel import Stability
from hybridprof.diff import DiffResult, diff_sessions
from hybridprof.errors import EXIT_INCONCLUSIVE
from hybridprof.reporting.text.diff_text import render_diff_text
from tests.sessions import HOSTILE
from tests.unit.diff.test_pair_ratios import PAIRS, drift, paired_runs
from tests.unit.diff.test_sessions import run

NOISY = Stability("noisy", 0.55, 2.4, 1, "stop background jobs")


def test_separate_stable_runs_with_a_heavier_layer_are_a_regression() -> None:
    diff = diff_sessions(run(1), run(2, heavier={"fc2": 1.4}))
    assert diff.gate is not None and diff.gate.answer == "regression"
    assert any("fc2" in reason for reason in diff.gate.reasons)
    assert exit_code(diff) == 1


def test_separate_runs_of_which_one_is_noisy_are_inconclusive_even_when_slower() -> None:
    diff = diff_sessions(run(1, stability=NOISY), run(2, heavier={"fc2": 1.4}))
    assert diff.regressions()  # the layer verdict is still said...
    assert diff.gate is not None and diff.gate.answer == "inconclusive"  # ...but not trusted
    joined = " ".join(diff.gate.reasons)
    assert "the base run is noisy" in joined and "diff --run" in joined and "fc2" in joined
    assert exit_code(diff) == EXIT_INCONCLUSIVE == 5
    text = render_diff_text(diff)
    assert "answer: inconclusive (exit 5 with --fail-on-regression)" in text
    assert "run again on a quieter machine or with more iterations" in text


def test_an_unchanged_model_in_separate_stable_runs_passes() -> None:
    diff = diff_sessions(run(1), run(2))
    assert diff.gate is not None and diff.gate.answer == "pass" and exit_code(diff) == 0


def test_an_interrupted_run_is_inconclusive() -> None:
    diff = diff_sessions(run(1), run(2, interrupted=True))
    assert diff.gate is not None and diff.gate.answer == "inconclusive"
    assert any("interrupted" in reason for reason in diff.gate.reasons)


def test_a_wide_interval_on_a_big_layer_is_inconclusive_and_named() -> None:
    base, new = run(1), run(2)
    rng = random.Random(9)
    wide = [500.0 * rng.uniform(0.5, 2.0) for _ in range(len(base.iteration_cpu_us))]
    record = base.records[0]
    assert record.per_iteration is not None
    spread = replace(
        record.per_iteration, self_cpu_us=type(record.per_iteration.self_cpu_us)(tuple(wide))
    )
    base = replace(base, records=(replace(record, per_iteration=spread), *base.records[1:]))
    diff = diff_sessions(base, new)
    assert [x.path for x in diff.undecided()] == ["fc1"]
    assert diff.layers[0].path == "fc1"  # right after the regressions, before the rest
    assert diff.gate is not None and diff.gate.answer == "inconclusive"
    assert any(
        "fc1" in reason and "wider than the threshold" in reason for reason in diff.gate.reasons
    )


def test_paired_runs_on_a_noisy_machine_still_find_a_regression() -> None:
    base, new = paired_runs(drift(11, 0.3, 3.0), scale={"conv": 3.0})
    base, new = (replace(s, stability=NOISY) for s in (base, new))
    diff = diff_sessions(base, new, paired=True)
    assert diff.gate is not None and diff.gate.answer == "regression" and exit_code(diff) == 1


def test_runs_that_cannot_be_paired_are_inconclusive() -> None:
    base, new = paired_runs(drift(12), scale={"conv": 3.0})
    short = replace(new, iterations=PAIRS - 1)
    diff = diff_sessions(base, short, paired=True)
    assert diff.gate is not None and diff.gate.answer == "inconclusive"
    assert "cannot be paired" in diff.gate.reasons[0]
    assert any("not judged pair by pair" in w for w in diff.warnings)


def test_a_diff_file_of_version_2_loads_and_answers_from_its_verdicts() -> None:
    diff = diff_sessions(run(1), run(2, heavier={"fc2": 1.4}))
    plain = json.loads(diff.to_json())
    for key in ("gate", "pairing", "min_delta_us", "min_delta_basis"):
        plain.pop(key, None)
    plain["schema_version"] = 2
    old = DiffResult.from_json(json.dumps(plain))
    assert old.gate is None and old.gate_answer() == "regression" and exit_code(old) == 1
    assert "answer:" not in render_diff_text(old)


def test_the_gate_and_the_matched_layers_are_in_the_page_with_names_escaped(tmp_path: Path) -> None:
    from hybridprof.reporting import write_diff_report

    diff = diff_sessions(run(1), run(2, heavier={"fc2": 1.4}, rename={"fc2": HOSTILE}))
    assert [x.match for x in diff.layers if x.new_path == HOSTILE] == ["class and shape"]
    page = write_diff_report(diff, tmp_path / "d.html").read_text()
    assert HOSTILE not in page
    gate = page[page.index('id="gate"') : page.index("</div>", page.index('id="gate"'))]
    assert "answer: regression" in gate and "&lt;img src=x" in gate
    matched = page[page.index("Matched under another path") :]
    assert "fc2 -&gt; &lt;img src=x" in matched[: matched.index("</ul>")]


def test_an_interrupted_paired_run_is_inconclusive_not_pass() -> None:
    base, new = paired_runs(drift(13))  # unchanged: it would pass
    assert diff_sessions(base, new, paired=True).gate_answer() == "pass"
    stopped = [replace(s, interrupted=True, stop_reason="interrupted") for s in (base, new)]
    diff = diff_sessions(*stopped, paired=True)
    assert diff.gate is not None and diff.gate.answer == "inconclusive"
    assert "the paired run was interrupted" in diff.gate.reasons[0]
    assert exit_code(diff) == EXIT_INCONCLUSIVE
    assert "answer: pass" not in render_diff_text(diff)


def test_a_paired_run_with_too_few_pairs_advises_more_iterations_not_diff_run() -> None:
    base, new = paired_runs(drift(14), scale={"conv": 3.0})
    few = [replace(s, iterations=2, iteration_cpu_us=s.iteration_cpu_us[:2]) for s in (base, new)]
    few = [replace(s, stability=NOISY) for s in few]
    diff = diff_sessions(*few, paired=True)
    assert diff.gate is not None and diff.gate.answer == "inconclusive"
    joined = " ".join(diff.gate.reasons)
    assert "too few" in joined and "--iters 6" in joined
    assert "diff --run" not in joined and "noisy" not in joined
