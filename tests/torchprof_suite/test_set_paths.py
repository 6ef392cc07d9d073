# From torchprof 1.4.0 (https://github.com/awwong1/torchprof, tag v1.4.0, commit adcb3ca),
# tests/test_set_paths.py. Copyright (c) 2019 Alexander W. Wong, MIT License: see LICENSE in this folder.
# Changed for hybridprof (see README.md here): the torchprof import line.
import unittest
import torch
import hybridprof.torchprof as torchprof
import torchvision


class TestSetPaths(unittest.TestCase):
    def test_cpu_profile_structure(self):
        model = torchvision.models.alexnet(pretrained=False)
        x = torch.rand([1, 3, 224, 224])

        paths = [("AlexNet", "features", "3"), ("AlexNet", "avgpool")]

        with torchprof.Profile(model, paths=paths) as prof:
            model(x)

        # print(prof)
        traces, event_dict = prof.raw()
        self.assertEqual(len(event_dict.keys()), 2)
        self.assertEqual(list(event_dict.keys()), paths)
