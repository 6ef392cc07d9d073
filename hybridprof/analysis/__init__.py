"""Figures worked out from sessions, torch-free and format-free: the layer table every table shows
(`layer_table`), its tree of rows (`tree`), the ops a table lists under a layer (`op_list`), each
median's confidence interval and the iterations' spread (`stats`), the stability verdict
(`stability`), the roofline verdicts of a `--flops` session (`roofline`), and merging the rank
sessions of a torchrun run (`merge`)."""
