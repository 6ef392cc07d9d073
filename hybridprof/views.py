"""Notebook display of the data model, plugged in from above.

Jupyter shows an object as HTML through its `_repr_html_`. The HTML of a session is the reporting
layer's work, and the data model must not import reporting (layers point down), so the data model
only asks a registry here, and the renderer is registered from above:
`hybridprof.reporting.notebook.install()` registers the session view, and the facade calls it
before it hands out a session (`hybridprof.<name>` and `hybridprof.api`). With nothing registered
(the data model imported on its own), `_repr_html_` returns None and Jupyter shows the text repr.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_VIEWS: dict[type, Callable[[Any], str]] = {}


def register_html_view(cls: type, render: Callable[[Any], str]) -> None:
    """Show instances of `cls` in notebooks as `render(instance)` (HTML); a later call replaces
    it."""
    _VIEWS[cls] = render


class HtmlView:
    """Mixin for data classes: `_repr_html_` through the view registered for the class."""

    __slots__ = ()

    def _repr_html_(self) -> str | None:
        render = _VIEWS.get(type(self))
        return None if render is None else render(self)


__all__ = ["HtmlView", "register_html_view"]
