"""Planning: what to measure (module tree + static source reading) and what this torch supports.

Uses only the data model, errors and the model loader; nothing in runtime, reporting or above.
"""
