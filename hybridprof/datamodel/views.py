"""Views of the data model that a higher layer supplies: the notebook HTML, the DataFrame and the
text table.

A session shows in Jupyter through `_repr_html_`, turns into a pandas DataFrame through
`to_dataframe()` and prints (`str(session)`) as its tree table. These are formats, the reporting
layer's work, and the data model must not import
reporting (layers point down), so the data model only asks this registry, and reporting fills it
from above: `hybridprof.reporting.install_views()` runs when the reporting package is imported, and
the facade (`hybridprof.<name>`, `hybridprof.api`) imports it before it hands out a session.
With nothing registered (the data model imported on its own), `_repr_html_` returns None (Jupyter
shows the text repr), `str()` is the one-line repr and `to_dataframe()` raises an error that says
what to import.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from hybridprof.errors import UsageError

ViewKind = Literal["html", "dataframe", "text"]
_VIEWS: dict[tuple[ViewKind, type], Callable[[Any], Any]] = {}


def register_view(kind: ViewKind, cls: type, render: Callable[[Any], Any]) -> None:
    """Make `render(instance)` the `kind` view of instances of `cls`; a later call replaces it."""
    _VIEWS[(kind, cls)] = render


def view_of(kind: ViewKind, obj: object) -> Callable[[Any], Any] | None:
    return _VIEWS.get((kind, type(obj)))


class Views:
    """Mixin for data classes: the notebook HTML and the DataFrame through the registered views.
    Its instances can be referred to weakly (what is worked out from a session is kept beside it
    while it lives, not longer)."""

    __slots__ = ("__weakref__",)

    def _repr_html_(self) -> str | None:
        render = view_of("html", self)
        return None if render is None else str(render(self))

    def _text_view(self) -> str | None:
        """The registered text view (the tree table), or None without one."""
        render = view_of("text", self)
        return None if render is None else str(render(self))

    def to_dataframe(self) -> Any:
        """One row per profiled path (a pandas DataFrame), as the reports' table shows it."""
        render = view_of("dataframe", self)
        if render is None:
            raise UsageError(
                "to_dataframe() needs hybridprof's reporting layer; import hybridprof.reporting "
                "(or use hybridprof.load_session) first"
            )
        return render(self)


__all__ = ["ViewKind", "Views", "register_view", "view_of"]
