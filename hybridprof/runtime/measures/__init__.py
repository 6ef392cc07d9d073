"""What the iterations measured, and how it becomes a session: one iteration's per-layer measures
(`iteration`), all iterations kept as arrays (`table`), and their medians and series folded into
`ModuleRecord`s and the `ProfileSession` (`aggregate`)."""
