"""The ways a run is driven, the top floor of the runtime.

- `fixed`: the fixed run behind `hybridprof.profile()` and `hybridprof run` (one lane);
- `interleaved`: the paired A/B run behind `hybridprof diff --run` (two lanes, ABBA);
- `speedup_run`: `--compare-eager`, the eager model against its compiled version as a paired run;
- `compile_setup`: what `--compile` / `compile=True` sets up;
- `with_block`: a `Profile` with-block as a run (its driver, compiled parts, session), whose
  steps around the user's own loop `user_steps` brackets;
- `iteration_loop`: the one loop that drives the iterations of the fixed and paired runs, over
  the `lanes` (one model each, with its `driver`: strategy, patches, clock);
- `options`: `RunOptions`; `guards`: what a run refuses before it starts; `block_notes`: what a
  with-block's session says about its steps.

Below: the features (compiled, memory, flops, distributed, training), the strategies, the events,
the measures and the basics; nothing below imports this floor.
"""
