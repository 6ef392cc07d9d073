"""A session, a plan and a comparison in words: the table `hybridprof run` and `report` print
(`fitted_table`), torchprof's text table (`text_table`), the .txt report (`text_report`), the
summary of a diff (`diff_text`) and of a speed-up (`speedup_text`), and the memory, compile, plan
and ranks sections (`memory_text`, `compiled_text`, `plan_text`, `ranks_text`)."""
