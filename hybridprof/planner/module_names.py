"""The names in a module tree that a dotted path cannot carry, and `--paths` values as typed.

torch's `add_module` refuses a child name that is empty or holds a dot, but `_modules[...] = ...`
takes any string: such a name cannot be told apart from a path of nested modules, and a name
holding a lone surrogate cannot go into a profiler range or an output file. Both are refused
where the tree is walked (`module_tree.named_modules`), naming the module.

A `--paths` value is resolved against the model's paths (`typed_parts`): a module's exact name
wins over splitting on commas, globbing and stripping, so "a,b", "x[0]" and " lead" can be
selected as typed.
"""

from __future__ import annotations

from collections.abc import Collection

from hybridprof.errors import UsageError


class Typed(str):
    """A `--paths` value as the user typed it, resolved against the model's paths (see
    `typed_parts`): a module named "a,b", "x[0]" or " lead" is selected by its name as typed."""

    __slots__ = ()


def check_child_name(parent: str, name: str) -> None:
    """UsageError for a child name a dotted path cannot name: empty, with a dot (torch's
    `add_module` refuses both; `_modules[...] = ...` does not), or not encodable text (a lone
    surrogate: neither torch's profiler ranges nor any output file can hold it)."""
    where = f"'{parent}'" if parent else "the model"
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(
            f"a child of {where} is named '{escaped(name)}', which is not valid text (it holds "
            "a lone surrogate); rename the module"
        ) from None
    if name and "." not in name:
        return
    shown = repr(name[:60])
    raise UsageError(
        f"a child of {where} is registered under the name {shown}, which no dotted path can "
        "tell apart from "
        + ("its parent" if not name else "a path of nested modules")
        + " (torch's add_module refuses such names; the model put it into _modules directly); "
        "rename the module"
    )


def escaped(text: str) -> str:
    """At most 60 characters of `text`, a lone surrogate shown as its escape (`\\ud800`)."""
    return text[:60].encode("utf-8", "backslashreplace").decode("utf-8")


def checked_class_names(path: str, names: tuple[str, str]) -> tuple[str, str]:
    """A module's class name and qualified name, refused (UsageError) if not valid text: a
    class whose `__module__` holds a lone surrogate would break every output the session goes
    to."""
    for name in names:
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise UsageError(
                f"the class of '{path or '(root)'}' is named '{escaped(name)}', which is not "
                "valid text (it holds a lone surrogate); rename the class"
            ) from None
    return names


def typed_parts(value: str, known: Collection[str]) -> list[tuple[str, bool]]:
    """What a typed `--paths` value selects, as (path or pattern, is a glob): the value itself
    when it is a path (an exact name wins over splitting, globbing and stripping); else each
    comma-separated part: itself, or stripped, when a path; else a glob if it has `*?[`; else a
    path that is not there (its error names the closest ones)."""
    if value in known:
        return [(value, False)]
    parts: list[tuple[str, bool]] = []
    for part in value.split(","):
        if part in known:
            parts.append((part, False))
        elif part.strip():
            text = part.strip()
            parts.append((text, text not in known and any(ch in text for ch in "*?[")))
    return parts


def typable(path: str) -> str:
    """A path as it can be typed after --paths: quoted when it holds a comma or edge spaces
    (typed exactly, such a name is still taken as it is: see `typed_parts`)."""
    return repr(path) if "," in path or path != path.strip() else path


__all__ = ["Typed", "check_child_name", "checked_class_names", "escaped", "typable", "typed_parts"]
