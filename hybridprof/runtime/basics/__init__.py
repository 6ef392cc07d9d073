"""The ground floor of the runtime: small modules that import nothing else of it.

Patching forwards and undoing it (`patching`), keeping a model's state and the random streams
(`model_state`), the step a run repeats (`workload`), when warm-up and the measured iterations stop
(`stopping`), the counts and threads a run accepts (`limits`), the machine's load (`machine`),
quieting torch's fd-2 chatter (`quiet`), signals (`signals`), failure hints (`failure`), and tensors
inside nested outputs (`tensors`).
"""
