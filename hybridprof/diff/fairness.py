"""What identifies each run, what makes a comparison unfair (warnings) and what a reviewer should
know (notes)."""

from __future__ import annotations

from hybridprof.datamodel import ProfileSession
from hybridprof.diff.match import same_model
from hybridprof.diff.result import RunIdentity

MOSTLY_OTHER = 0.5  # fewer layer paths than this share in both runs: the models mostly differ


def identity(session: ProfileSession, label: str) -> RunIdentity:
    env = session.environment
    return RunIdentity(
        label=label,
        model_file=session.model_file,
        model_hash=session.model_hash,
        started_at=session.started_at,
        hybridprof_version=env.hybridprof_version,
        torch_version=env.torch_version,
        python_version=env.python_version,
        cpu=env.cpu,
        device=env.device,
        threads=env.threads,
        strategy=session.strategy,
        iterations=session.iterations,
        stability=session.stability.verdict if session.stability else "unknown",
    )


def comparability(base: ProfileSession, new: ProfileSession) -> tuple[list[str], list[str]]:
    """What makes the comparison unfair (warnings) and what a reviewer should know (notes)."""
    warnings = []
    checks = (
        ("torch version", base.environment.torch_version, new.environment.torch_version),
        (
            "hybridprof version",
            base.environment.hybridprof_version,
            new.environment.hybridprof_version,
        ),
        ("threads", base.environment.threads, new.environment.threads),
        ("CPU", base.environment.cpu, new.environment.cpu),
        ("device", base.environment.device, new.environment.device),
        ("strategy", base.strategy, new.strategy),
        ("backward profiled", base.backward, new.backward),
    )
    for what, a, b in checks:
        if a != b:
            warnings.append(f"different {what}: base {a}, new {b}")
    shapes = _input_shape_change(base, new)
    if shapes:
        warnings.append(shapes)
    for name, session in (("base", base), ("new", new)):
        if session.stability is not None and session.stability.verdict == "noisy":
            cv = session.stability.iteration_cv
            warnings.append(f"the {name} run is noisy (iteration CV {cv:.0%}); small changes hide")
        if session.interrupted:
            warnings.append(f"the {name} run was interrupted ({session.iterations} iterations)")
        if session.iterations < 7:
            warnings.append(
                f"the {name} run has {session.iterations} iteration(s): too few for intervals "
                "(7 or more needed); verdicts are 'unknown'"
            )
    notes = [_hash_note(base, new)]
    return warnings, [n for n in notes if n]


def model_warnings(base: ProfileSession, new: ProfileSession, across_models: bool) -> list[str]:
    """Said before anything else: the runs profile different models, or models that differ in
    most layers, so "slower" and "faster" would compare unrelated layers."""
    if not same_model(base, new):
        models = f"base {base.plan.root_class}, new {new.plan.root_class}"
        if across_models:
            return [
                f"the runs profile different models ({models}); layers are paired across them "
                "by path, class and position (--match-across-models), so pairs may be unrelated"
            ]
        return [
            f"the runs profile different models ({models}): no layer is compared, each is "
            "listed as removed or added; give --match-across-models to pair them anyway"
        ]
    base_paths, new_paths = {r.path for r in base.records}, {r.path for r in new.records}
    shared, most = len(base_paths & new_paths), max(len(base_paths), len(new_paths))
    if most and shared < MOSTLY_OTHER * most:
        return [
            f"the models differ in most layers: only {shared} of {most} layer paths are in both "
            "runs; layers paired by class and position may be unrelated"
        ]
    return []


def _input_shape_change(base: ProfileSession, new: ProfileSession) -> str:
    """The model's input shapes: those of the first call of the shallowest layers, compared (a
    deeper layer's input changes with the layers before it, which is the change under review)."""
    first = {r.path: r.input_shapes for r in base.records}
    depth = min((_depth(r.path) for r in new.records if r.path in first), default=0)
    for record in new.records:
        if _depth(record.path) != depth:
            continue
        before = first.get(record.path)
        if before is not None and before and record.input_shapes and before != record.input_shapes:
            return (
                f"different input shapes: layer '{record.path}' got {', '.join(before)} in base, "
                f"{', '.join(record.input_shapes)} in new"
            )
    return ""


def _depth(path: str) -> int:
    return 0 if not path else path.count(".") + 1


def _hash_note(base: ProfileSession, new: ProfileSession) -> str:
    if base.model_hash is None or new.model_hash is None:
        return "model file hash not recorded in both runs"
    if base.model_hash == new.model_hash:
        return (
            "model file unchanged (same sha256): any difference comes from the machine, the "
            "environment or noise"
        )
    return "model file changed (sha256 differs), as expected for a code change"
