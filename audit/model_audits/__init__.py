"""Auditing what the user brings: a trained model (`audit-model`) or a file of scores (`audit-scores`).

Reads the user's model and data, runs the attacks and statistics, returns results.json-shaped dicts.
"""
