"""The `run` job: sweep target ε, train targets (and synthesizers), attack, bound, track, report.

`run_audit(config)` is its Python API; the CLI's `run` is a thin shell around it.
"""
