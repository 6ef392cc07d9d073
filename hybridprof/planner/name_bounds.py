"""Module names within what hybridprof can save and read back.

A session holds every profiled module's path and class name, and findings and warnings quote
them; the reader refuses texts over 100,000 characters (`datamodel.jsonbounds.MAX_TEXT`). A model
with a longer name (a generated one, a hostile file) would be profiled and saved, and then refused
by `hybridprof report`. So names are bounded when the model's tree is read, well below the
reader's bound so that a message quoting a few of them stays within it too; no real model comes
near (a path 1,000 modules deep is some 10,000 characters). Paths nest at most `MAX_PATH_PARTS`
deep, as the reader wants too.
"""

from __future__ import annotations

from collections.abc import Sequence

from hybridprof.datamodel import ModuleTarget
from hybridprof.datamodel.jsonbounds import MAX_PATH_PARTS
from hybridprof.errors import UsageError

MAX_NAME = 20_000  # characters of a module path or class name
_SHOWN = 40  # characters of an overlong name quoted in the error


def checked_names(targets: Sequence[ModuleTarget]) -> tuple[ModuleTarget, ...]:
    """`targets` as they are, after checking every path and class name is within `MAX_NAME`."""
    for target in targets:
        for what, name in (("module path", target.path), ("class name", target.class_name)):
            if len(name) > MAX_NAME:
                raise UsageError(
                    f"a {what} of {len(name):,} characters ({name[:_SHOWN]!r}...) is longer "
                    f"than hybridprof can save ({MAX_NAME:,}); give the module a shorter name"
                )
        if target.depth > MAX_PATH_PARTS:
            raise UsageError(
                f"module {target.path[:_SHOWN]!r}... is {target.depth:,} modules deep, deeper "
                f"than hybridprof can show ({MAX_PATH_PARTS:,}); profile a part of the model"
            )
    return tuple(targets)


__all__ = ["MAX_NAME", "checked_names"]
