"""The library's first minutes: a misspelt option names the right one, a session prints as its
table (its repr is one line), and `display()` shows as the table where a repr is shown."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import hybridprof
from hybridprof.datamodel import ProfileSession


def small() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def test_a_misspelt_option_suggests_the_one_meant() -> None:
    with pytest.raises(TypeError) as info:
        hybridprof.profile(small(), torch.rand(2, 8), iter=10)
    assert str(info.value).startswith(
        "profile() got an unexpected keyword argument 'iter'; did you mean 'iters'?"
    )
    assert "RunOptions.__init__" not in str(info.value)


def test_a_session_prints_as_its_table_and_its_repr_is_one_line() -> None:
    session = hybridprof.profile(small(), torch.rand(2, 8), warmup=0, iters=3)
    text = str(session)
    assert text.splitlines()[0].startswith("Module ") and "├── 0" in text
    assert text.splitlines()[-1].startswith("(outside modules)")
    line = repr(session)
    assert "\n" not in line and len(line) < 200
    assert line.startswith("<ProfileSession of Sequential: 4 layers, 3 measured forwards, median ")


def test_without_reporting_a_session_prints_its_repr() -> None:
    from hybridprof.datamodel.views import _VIEWS

    session = hybridprof.profile(small(), torch.rand(2, 8), warmup=0, iters=1)
    saved = dict(_VIEWS)
    try:
        _VIEWS.clear()
        assert str(session) == repr(session)
    finally:
        _VIEWS.update(saved)
    assert isinstance(session, ProfileSession)


def test_display_is_a_str_that_shows_as_the_table() -> None:
    model = small()
    with hybridprof.Profile(model) as prof:
        model(torch.rand(2, 8))
    shown = prof.display(show_events=True)
    assert isinstance(shown, str) and repr(shown) == str(shown)  # no quotes, no literal \n
    assert "aten::addmm" in repr(shown) and "\n" in repr(shown)

    class Printer:  # IPython's pretty printer, as a notebook's text view calls it
        def __init__(self) -> None:
            self.parts: list[str] = []

        def text(self, part: str) -> None:
            self.parts.append(part)

    printer = Printer()
    shown._repr_pretty_(printer, False)  # type: ignore[attr-defined]
    assert printer.parts == [str(shown)]
