"""A machine's fingerprint: what must match for two sessions' times to be one series.

Sessions measured on another CPU model or core count, another device, another torch or another
thread count are not comparable figure by figure, so each fingerprint is a series of its own
(airspeed velocity keeps one record per commit x machine x environment for the same reason). The
figures come from the session's own environment (its CPU string names the model and the logical
cores), never from the machine that adds it: a CI job may add sessions measured elsewhere. A label
(`history add --machine NAME`) tells apart runners that look alike but are not (two cloud hosts of
one CPU model with other memory), or joins nothing: it is one more field of the fingerprint.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from hybridprof.datamodel import Environment

KEY_CHARS = 16  # of the sha256: 64 bits, no collision among the machines of one history


@dataclass(frozen=True, slots=True)
class Machine:
    """The fields a series is keyed by (see the module docstring)."""

    cpu: str  # the model name and logical cores, as the session recorded them
    device: str  # "cpu" or e.g. "cuda:0 (NVIDIA H200)"
    torch: str
    threads: int
    label: str = ""  # `--machine NAME`; empty when not given

    def key(self) -> str:
        """A stable short hash of every field: the series' name in the store."""
        fields = [self.cpu, self.device, self.torch, self.threads, self.label]
        text = json.dumps(fields, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:KEY_CHARS]

    def describe(self) -> str:
        """One line for people: `"ci-1": Xeon (4 logical cores), cpu, torch 2.13.0, 1 thread`."""
        threads = f"{self.threads} thread{'s' if self.threads != 1 else ''}"
        where = self.cpu if self.device == "cpu" else f"{self.cpu}, {self.device}"
        label = f'"{self.label}": ' if self.label else ""
        return f"{label}{where}, torch {self.torch}, {threads}"


def machine_of(environment: Environment, label: str = "") -> Machine:
    """The fingerprint of the machine a session was measured on."""
    return Machine(
        cpu=environment.cpu,
        device=environment.device,
        torch=environment.torch_version,
        threads=environment.threads,
        label=label,
    )


__all__ = ["Machine", "machine_of"]
