"""hybridprof in the trainers people train with: a Hugging Face `TrainerCallback`
(`hybridprof.integrations.hf`, extra `hybridprof[hf]`) and a PyTorch Lightning `Callback`
(`hybridprof.integrations.lightning`, extra `hybridprof[lightning]`).

Each profiles the chosen optimizer steps of a real `Trainer.train()` / `Trainer.fit()` with
`hybridprof.Profile` (`trainer_steps.py`, shared by both) and writes the session and report into
the run's output folder. Neither framework is imported until its callback class is asked for.
"""
