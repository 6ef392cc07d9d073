"""Typed errors. Library code raises these; only the CLI turns them into one line and an exit
code."""

from __future__ import annotations


class HybridprofError(Exception):
    """Base of every error hybridprof reports to a user as one line.

    The message must name the problem and, where there is one, the fix.
    """

    exit_code: int = 1
    # Already printed to the user (a torchrun rank says its own error before telling the others,
    # who then stop it): the command's error handler must not print it again.
    reported: bool = False


class UsageError(HybridprofError):
    """Bad command-line input: wrong option values, an unknown path, a bad shape."""

    exit_code = 2


class ModelLoadError(HybridprofError):
    """The model file could not be read, imported, or its entry did not give an nn.Module."""

    exit_code = 2


class SelectionError(UsageError, ValueError):
    """A selector (path, glob, depth) matched nothing; the message lists close matches.

    Also a ValueError, as torchprof-era code expects for an unknown path.
    """


class NestedProfileError(UsageError, RuntimeError):
    """A profile was started inside another one (hybridprof's or torch.profiler's).

    Also a RuntimeError, as a second hybridprof Profile raised before.
    """


class OutputError(HybridprofError):
    """An output path cannot be written: missing folder, unwritable, or exists without --force."""

    exit_code = 2


class SessionFileError(HybridprofError):
    """A session or plan file is corrupt, foreign, or from a newer schema."""

    exit_code = 2


class ModelRunError(HybridprofError):
    """The user's model raised while being profiled; the message names the layer."""

    exit_code = 3


class DeviceError(HybridprofError):
    """The requested device is not available (e.g. --device cuda without CUDA)."""

    exit_code = 2


class ReportDependencyError(HybridprofError):
    """A system library a renderer needs (Pango for weasyprint) is missing."""

    exit_code = 4


class DistributedError(HybridprofError):
    """A data-parallel run's ranks could not finish together: another rank failed, or the final
    gather of the sessions timed out."""

    exit_code = 3


class Terminated(KeyboardInterrupt):
    """SIGTERM during `hybridprof run`: stops the run like Ctrl-C (exit 143 instead of 130)."""


class BadValueError(UsageError, ValueError):
    """A library argument has a value it cannot take (e.g. `hybridprof.schedule(active=0)`).

    Also a ValueError, as Python code expects for a bad argument value.
    """


# `hybridprof diff --fail-on-regression` when the comparison cannot tell a regression from noise
# (exit 1 is a regression, 2-4 errors, 130/143 interrupted): "run again on a quieter machine or
# with more iterations".
EXIT_INCONCLUSIVE = 5
