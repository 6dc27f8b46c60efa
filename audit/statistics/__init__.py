"""Statistics: ROC metrics, ε lower bounds and estimates, accountants, synthetic-data metrics.

Pure functions of arrays and parameters (no files, no MLflow, no CLI); each cites its paper.
"""
