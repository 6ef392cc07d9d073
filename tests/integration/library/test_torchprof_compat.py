"""Code written for torchprof runs unchanged: its README's calls and its test's checks, on
AlexNet."""

from __future__ import annotations

import pytest
import torch

import hybridprof
from hybridprof.examples import alexnet

FEATURES = [("AlexNet", "features", str(i)) for i in range(13)]
CLASSIFIER = [("AlexNet", "classifier", str(i)) for i in range(7)]
EXPECTED_TRACES = [
    (("AlexNet",), False),
    (("AlexNet", "features"), False),
    *[(p, True) for p in FEATURES],
    (("AlexNet", "avgpool"), True),
    (("AlexNet", "classifier"), False),
    *[(p, True) for p in CLASSIFIER],
]
# One op each layer kind must show (a subset: op lists differ between torch versions).
KIND_OPS = {
    "Conv2d": "aten::conv2d",
    "ReLU": "aten::relu_",
    "MaxPool2d": "aten::max_pool2d",
    "Linear": "aten::linear",
    "AdaptiveAvgPool2d": "aten::adaptive_avg_pool2d",
    "Dropout": "aten::dropout",
}


@pytest.mark.parametrize("strategy", ["session", "per-call"])
def test_raw_keeps_torchprof_shapes(strategy: str) -> None:
    model = alexnet().eval()
    x = torch.rand([1, 3, 224, 224])
    with hybridprof.Profile(model, use_cuda=False, strategy=strategy) as prof:
        model(x)
    traces, event_lists_dict = prof.raw()
    assert [(t.path, t.leaf) for t in traces] == EXPECTED_TRACES
    for path, leaf, module in traces:
        event_lists = event_lists_dict[path]  # every module has an entry, as in torchprof
        if not leaf:
            assert len(event_lists) == 0
            continue
        assert len(event_lists) == 1  # model(x) ran once
        names = {e.name for e in event_lists[0]}
        assert KIND_OPS[type(module).__name__] in names, (path, names)
        assert "Name" in str(event_lists[0])  # prints as a table, like torch's EventList
    assert isinstance(prof.display(), str) and isinstance(prof.display(show_events=True), str)
    assert str(prof) == prof.display(show_events=False)


def test_paths_select_non_leaf_layers_as_torchprof_tuples() -> None:
    model = alexnet()
    paths = [("AlexNet", "features", "3"), ("AlexNet", "classifier")]
    with hybridprof.Profile(model, paths=paths, profile_memory=True) as prof:
        model(torch.rand([1, 3, 224, 224]))
    records = {r.path: r for r in prof.session().records}
    assert set(records) == {"features.3", "classifier"}
    assert records["classifier"].total_cpu_us.median >= records["classifier"].self_cpu_us.median
    header = str(prof).splitlines()[0]
    assert [h.strip() for h in header.split("|")] == [
        "Module",
        "Self CPU total",
        "CPU total",
        "Self CPU Mem",
        "CPU Mem",
        "Number of Calls",
    ]
