"""Which measured rounds are excluded for time lost to other processes, and the line saying so."""

from __future__ import annotations

from hybridprof.runtime.runs.stolen_time import (
    AUTO_EXTRA,
    MIN_LOST_US,
    StolenTime,
    stolen,
    waits_line,
)


def test_an_iteration_is_stolen_past_a_share_of_its_step_and_a_floor() -> None:
    assert not stolen(0.0, 1000.0)
    assert not stolen(MIN_LOST_US, 10.0)  # the floor: a tick on a tiny step is not a theft
    assert not stolen(19.0, 1000.0)  # under 2%
    assert stolen(21.0, 1000.0)
    assert stolen(4000.0, 50_000.0)


def test_rounds_are_excluded_up_to_the_extra_allowed_then_kept() -> None:
    ledger = StolenTime.of(1, 2)
    assert not ledger.exclude([0.0], [1000.0])
    assert ledger.exclude([500.0], [1000.0]) and ledger.exclude([700.0], [1000.0])
    assert not ledger.exclude([900.0], [1000.0])  # the limit: kept, and counted
    assert (ledger.excluded, ledger.kept_over, ledger.lost_us) == (2, 1, [1200.0])
    waits = ledger.waits(0, [0.0, 900.0])
    assert waits is not None and waits.excluded == 2 and waits.kept_wait_us == (0.0, 900.0)
    assert StolenTime.of(1, "auto").extra == AUTO_EXTRA


def test_a_pair_is_excluded_when_either_side_lost_time() -> None:
    ledger = StolenTime.of(2, 10)
    assert ledger.exclude([0.0, 300.0], [1000.0, 1000.0])
    assert ledger.lost_us == [0.0, 300.0]


def test_unknown_waits_are_never_excluded_nor_recorded() -> None:
    ledger = StolenTime.of(1, 10)
    assert not ledger.exclude([None], [1000.0])
    assert ledger.waits(0, [None, None]) is None


def test_the_line_says_how_much_was_taken_out() -> None:
    ledger = StolenTime.of(1, 20)
    for lost in (1000.0, 2000.0, 1100.0):
        ledger.exclude([lost], [10_000.0])
    line = waits_line(ledger.waits(0, [0.0] * 20), 20)
    assert line == "3 of 23 measured iterations lost 4.1 ms to other processes; excluded"
    assert waits_line(StolenTime.of(1, 20).waits(0, [0.0] * 20), 20) is None
    full = StolenTime.of(1, 0)
    full.exclude([800.0], [1000.0])
    said = waits_line(full.waits(0, [800.0]), 1)
    assert said is not None and "1 kept iterations lost time too (0.8 ms" in said
