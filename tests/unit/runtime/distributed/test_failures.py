"""What the ranks of a torchrun run tell each other through torchrun's store, on a dict standing
in for the store (issue 25: M-12, M-13, L-15); the real runs are in
tests/integration/torchrun/test_torchrun_stops.py."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from hybridprof.errors import Terminated
from hybridprof.runtime.basics.signals import TerminateHandler
from hybridprof.runtime.distributed.failures import FailureBoard, StepWatch, hang_report


class DictStore:
    """The four calls of torchrun's TCPStore the board makes."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def set(self, key: str, value: str) -> None:
        self.data[key] = value.encode()

    def get(self, key: str) -> bytes:
        return self.data[key]

    def check(self, keys: list[str]) -> bool:
        return all(k in self.data for k in keys)

    def add(self, key: str, amount: int) -> int:
        value = int(self.data.get(key, b"0")) + amount
        self.data[key] = str(value).encode()
        return value


def boards(world: int) -> list[FailureBoard]:
    store = DictStore()
    return [FailureBoard(rank, world, store) for rank in range(world)]


def watching(board: FailureBoard, progress: int) -> None:
    board.steps = StepWatch(lambda: (2, 0.0), lambda: progress, timeout_s=5)
    board._publish_progress()


def test_the_rank_furthest_behind_is_the_one_that_hung() -> None:
    ranks = boards(3)
    for board, progress in zip(ranks, (12, 7, 12), strict=True):
        watching(board, progress)
    assert ranks[0].furthest_behind() == [1]
    assert ranks[1].furthest_behind() == [1]


def test_a_rank_that_never_said_how_far_it_got_counts_as_furthest_behind() -> None:
    ranks = boards(2)
    watching(ranks[0], 5)
    assert ranks[0].furthest_behind() == [1]


def test_the_timeout_names_the_hung_rank_from_either_side() -> None:
    own = hang_report(1, 2, 5.0, [1])
    assert (own.culprit, own.line) == (
        1,
        "rank 1: step 3 of the run did not finish within 5 s (--step-timeout): it hung in its "
        "forward or backward",
    )
    seen = hang_report(0, 2, 5.0, [1])
    assert seen.culprit == 1
    assert seen.line.startswith("rank 1 failed: step 3 of the run did not finish within 5 s")
    assert seen.line.endswith("rank 1 was furthest behind, hung in its forward or backward "
                              "(rank 0 stopped)")  # fmt: skip
    tie = hang_report(0, 2, 5.0, [0, 1])
    assert tie.culprit == 0 and "on ranks 0, 1, none further behind than the others" in tie.line


def test_a_failure_posted_for_another_rank_is_not_taken_as_the_posters_own() -> None:
    ranks = boards(2)
    ranks[0].post("hung", rank=1, wait_s=0)
    failure = ranks[1].other_failure()
    assert failure is not None and (failure.rank, failure.by, failure.message) == (1, 0, "hung")
    assert ranks[0].other_failure() is None  # its own post


def test_interrupted_ranks_say_whether_they_saved_their_session() -> None:
    ranks = boards(3)
    ranks[1].note_stopped(saved=True)
    ranks[2].note_stopped(saved=False)
    assert ranks[0].stopped_ranks(wait_s=0) == {1: True, 2: False}


def test_sigterm_stops_a_run_once() -> None:
    handler = TerminateHandler()
    with pytest.raises(Terminated):
        handler(15, None)
    handler(15, None)  # a second one would only abort the saving that the first began
    assert handler.received


def test_a_failing_rank_ends_its_process_at_once_with_its_errors_exit_code() -> None:
    # No destructor of torch.distributed's may run while torchrun stops the rank (the window of
    # a rank's SIGABRT): the rank leaves with os._exit, after printing and posting its error.
    code = textwrap.dedent(
        """
        import argparse, atexit, threading
        from pathlib import Path
        from hybridprof.cli.run_ranks import RankOutputs, _Rank
        from hybridprof.errors import UsageError
        from hybridprof.runtime.distributed.rank import Launch

        class Board:
            ending = threading.Event()
            def other_failure(self): return None
            def post(self, message): print("posted:", message)
            def close(self): print("closed")

        atexit.register(print, "interpreter teardown ran")
        outputs = RankOutputs(Path("s.json"), None, (), None, frozenset())
        rank = _Rank(argparse.Namespace(), [], Launch(1, 2, 1), outputs, board=Board())
        rank._failed(UsageError("bad shape"))
        print("returned")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stdout.splitlines() == ["posted: bad shape", "closed"]
    assert done.stderr.splitlines() == ["hybridprof: error: rank 1: bad shape"]


def test_a_sigterm_while_the_watcher_ends_the_rank_is_not_said_as_news() -> None:
    # The watcher named a hung rank (or saw another rank fail) and is ending this one; torchrun's
    # SIGTERM to the ranks left arrives meanwhile: the rank leaves with the watcher's line only,
    # not with a second line saying it was terminated.
    code = textwrap.dedent(
        """
        import argparse, os, sys, threading
        from pathlib import Path
        from hybridprof.cli.common import guarded
        from hybridprof.cli.run_ranks import RankOutputs, _Rank
        from hybridprof.errors import Terminated
        from hybridprof.runtime.distributed import failures
        from hybridprof.runtime.distributed.rank import Launch

        class Board:
            ending = threading.Event()
            def start(self): self.ending.set()  # the watcher is ending this rank
            def wait_for_the_end(self):
                print("hybridprof: error: rank 1: the watcher's line", file=sys.stderr, flush=True)
                os._exit(3)
            def note_stopped(self, saved): print("noted", saved)
            def close(self): pass

        failures.FailureBoard.connect = classmethod(lambda cls, rank, world: Board())

        class Hung(_Rank):
            def _profiled(self, model_file, entry): raise Terminated  # torchrun's SIGTERM

        outputs = RankOutputs(Path("s.json"), None, (), None, frozenset())
        rank = Hung(argparse.Namespace(), [], Launch(1, 2, 1), outputs)
        print("returned", guarded(lambda: rank.run(Path("m.py"), "build_model"), False))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr
    assert done.stdout == ""
    assert done.stderr.splitlines() == ["hybridprof: error: rank 1: the watcher's line"]
