"""Profiling `torch.compile`d code layer by layer, without changing what dynamo compiles.

- `detect`: where a model has compiled code (`torch.compile(module)`, `module.compile()`,
  compiled children), its backend and mode, and which modules run inside it (never patched);
- `instrument`: hybridprof's own compile (its warm-up) with inductor's codegen hooked, so that
  every generated kernel and extern call is recorded with the FX nodes it came from;
- `kernel_map`: those call sites as a map to module paths (one module, or the lowest common
  ancestor of the modules a fused kernel spans);
- `kernel_events`: one iteration's profiler events rewritten so that the ordinary attribution puts
  each kernel in its layer and the compiled region's glue outside every layer;
- `dynamo_facts`: compile time, graphs, graph breaks and recompiles from dynamo's bookkeeping;
- `islands`: ranges for modules that run eagerly inside compiled code (after a graph break);
- `compile_again`: code compiled before the profile, compiled again under the hooks;
- `compiled_step`: a compiled function that calls the model (a compiled train step): found, and
  mapped like a compiled model, its optimizer's kernels to the optimizer;
- `compiled_run`: the pieces together for a run (`CompiledRun`).

What `--compile` sets up and the eager-against-compiled speedup run are ways of driving a run:
`runtime/runs/compile_setup.py` and `runtime/runs/speedup_run.py`.
"""
