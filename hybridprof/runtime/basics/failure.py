"""What to say after "forward failed in <layer>": the fix for a failure the inputs cause, else
where the failing code is.

An error about shapes, sizes, dtypes or indices ("mat1 and mat2 shapes cannot be multiplied",
"expected scalar type Float", "index out of range in self", a missing argument) is most often
the inputs not fitting the model, so the line says to check them. Any other error is a bug in a
layer's own code (a ZeroDivisionError, a KeyError, a typo), and telling the user to check the
inputs would send them the wrong way: the line names the file and line that raised instead, the
innermost frame of the traceback outside torch and hybridprof (the user's forward, or the
third-party layer's).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from types import TracebackType

import torch

import hybridprof

CHECK_INPUTS = "check that the inputs fit the model"
ABOUT_INPUTS = re.compile(
    r"shape|size|dimension|\bdims?\b|dtype|scalar type|channels|cannot be multiplied"
    r"|index out of range|out of bounds|positional argument|keyword argument|but got",
    re.IGNORECASE,
)
_LIBRARIES = tuple(
    str(Path(module.__file__).resolve().parent) + os.sep
    for module in (torch, hybridprof)
    if module.__file__ is not None
)


def failure_hint(exc: BaseException) -> str:
    """ "check that the inputs fit the model", "at net.py:12 in forward", or "" (nowhere known)."""
    if isinstance(exc, SystemExit):
        where = raised_at(exc)
        return f"at {where}" if where else ""
    if about_inputs(exc):
        return CHECK_INPUTS
    where = raised_at(exc)
    return f"at {where}" if where else ""


def about_inputs(exc: BaseException) -> bool:
    return isinstance(exc, RuntimeError | ValueError | TypeError | IndexError) and bool(
        ABOUT_INPUTS.search(str(exc))
    )


def raised_at(exc: BaseException) -> str | None:
    """`file:line in function` of the innermost frame outside torch and hybridprof."""
    found: TracebackType | None = None
    tb = exc.__traceback__
    while tb is not None:
        if not _in_library(tb.tb_frame.f_code.co_filename):
            found = tb
        tb = tb.tb_next
    if found is None:
        return None
    code = found.tb_frame.f_code
    return f"{shown_file(code.co_filename)}:{found.tb_lineno} in {code.co_name}"


def _in_library(filename: str) -> bool:
    return str(Path(filename).resolve()).startswith(_LIBRARIES)


def shown_file(filename: str) -> str:
    """A third-party file from where its package starts (`transformers/models/...`); the user's
    own file relative to the working folder when it is inside it."""
    if "site-packages" + os.sep in filename:
        return filename.split("site-packages" + os.sep, 1)[1]
    try:
        relative = os.path.relpath(filename)
    except ValueError:  # another drive (Windows)
        return filename
    return relative if not relative.startswith("..") else filename


__all__ = ["CHECK_INPUTS", "about_inputs", "failure_hint", "raised_at", "shown_file"]
