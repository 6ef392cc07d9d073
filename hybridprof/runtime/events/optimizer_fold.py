"""The optimizer's share of a training step's events: its parts, ops and param groups.

The walk (`attribution.py`) hands every range that is no layer to `open_special`, which decides what
runs inside it (`events/training_names.py` names them):

- a part of the optimizer (torch's `Optimizer.step#...` / `Optimizer.zero_grad#...`, hybridprof's
  clip_grad, grad_scaler and zero_grad ranges): every event inside is the optimizer's, whatever
  encloses the range (an optimizer stepped from a post-accumulate-grad hook runs inside a backward
  node, and is still the optimizer), until an inner part takes over (GradScaler's `step` calls the
  optimizer's) or a closure opens;
- a closure (`optimizer.step(closure)`: Lightning runs the forward, the loss and the backward in
  it): nothing inside is the optimizer's; layers and backward nodes are theirs as anywhere, the
  rest is outside;
- a param group's marker (zero length, opened where the optimizer starts each group): the group
  runs from its marker to the next one or the step's end, less the closures in between, so the
  step's Python between ops counts for the group it runs for;
- a step range of the with-block: a plain event outside every layer (its own time, the Python
  between the user's statements, is outside).

Layer ranges and backward nodes always reset the optimizer context (the walk clears OPT there).
"""

from __future__ import annotations

from hybridprof.runtime.events.frames import CHILD_NS, EVENT, OPT, Frame
from hybridprof.runtime.events.kineto import Event
from hybridprof.runtime.events.training_names import (
    GROUP_PREFIX,
    Special,
    group_index,
    optimizer_class,
)
from hybridprof.runtime.measures.iteration import IterationMeasure, OpMeasure

# The parts whose calls are counted: one range is one call (clipping and GradScaler open a range
# around each of the private functions they call, several per call).
COUNTED_PARTS = frozenset({"step", "zero_grad"})

# The record of one optimizer step (its outermost `Optimizer.step#` range): [id of that range's
# frame, its param-group markers (start ns, index), its closures (start ns, duration ns), class].
StepRecord = list[object]


def open_special(frame: Frame, kind: Special, measure: IterationMeasure) -> None:
    """Set what a special range opens: an optimizer part, a closure, a group marker."""
    event: Event = frame[EVENT]
    outer = frame[OPT]  # inherited from the enclosing frame
    if kind == "closure":
        if outer is not None and outer[1] is not None:
            outer[1][2].append((event.start_ns, event.end_ns - event.start_ns))
        frame[OPT] = None
        return
    if kind == "group":
        if outer is not None and outer[1] is not None:
            outer[1][1].append((event.start_ns, group_index(event.name)))
        return
    if kind == "step":
        return
    part = kind[5:]  # "part:step" -> "step"
    record = outer[1] if outer is not None else None
    optimizer = measure.optimizer_measure()
    if part == "step" and record is None:
        cls = optimizer_class(event.name)
        record = [id(frame), [], [], cls]
        optimizer.row.calls += 1
        optimizer.classes[cls] = None
    if part in COUNTED_PARTS and (outer is None or outer[0] != part):
        optimizer.part_calls[part] = optimizer.part_calls.get(part, 0) + 1
    frame[OPT] = (part, record)


def fold_optimizer(frame: Frame, measure: IterationMeasure) -> None:
    """An event in the optimizer's context: its self time to its part, itself to the ops."""
    event: Event = frame[EVENT]
    part, record = frame[OPT]
    duration = event.end_ns - event.start_ns
    self_us = (duration - frame[CHILD_NS]) / 1000
    optimizer = measure.optimizer_measure()
    optimizer.parts[part] = optimizer.parts.get(part, 0.0) + self_us
    optimizer.row.self_cpu_us += self_us
    name = event.name
    if not name.startswith(GROUP_PREFIX):
        op = optimizer.row.ops.get(name)
        if op is None:
            op = optimizer.row.ops[name] = OpMeasure(name)
        op.calls += 1
        op.self_cpu_us += self_us
        op.total_cpu_us += duration / 1000
    if record is not None and record[0] == id(frame):
        _fold_groups(event, record, measure)


def unfold_optimizer(frame: Frame, measure: IterationMeasure) -> None:
    """Take back a folded event that turned out to be merged into its parent (`_absorb`)."""
    event: Event = frame[EVENT]
    part = frame[OPT][0]
    duration = event.end_ns - event.start_ns
    self_us = (duration - frame[CHILD_NS]) / 1000
    optimizer = measure.optimizer_measure()
    optimizer.parts[part] -= self_us
    optimizer.row.self_cpu_us -= self_us
    op = optimizer.row.ops.get(event.name)
    if op is not None:
        op.calls -= 1
        op.self_cpu_us -= self_us
        op.total_cpu_us -= duration / 1000


def _fold_groups(step: Event, record: StepRecord, measure: IterationMeasure) -> None:
    """Each param group's span of the step that just closed: marker to marker (the last to the
    step's end), less the closures in it."""
    marks: list[tuple[int, int]] = record[1]  # type: ignore[assignment]
    closures: list[tuple[int, int]] = record[2]  # type: ignore[assignment]
    if not marks:
        return
    groups = measure.optimizer_measure().groups
    ends = [start for start, _ in marks[1:]] + [step.end_ns]
    for (start, index), end in zip(marks, ends, strict=True):
        inside = sum(length for at, length in closures if start <= at < end)
        key = f"{record[3]} group {index}"
        groups[key] = groups.get(key, 0.0) + max(0, end - start - inside) / 1000


def finish(measure: IterationMeasure) -> None:
    """The optimizer row's total is its self time (it has no rows nested in it)."""
    optimizer = measure.optimizer
    if optimizer is not None:
        optimizer.row.total_cpu_us = optimizer.row.self_cpu_us


__all__ = ["finish", "fold_optimizer", "open_special", "unfold_optimizer"]
