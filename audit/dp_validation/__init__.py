"""Validating DP claims of code: accountants, canary audits of trainers, mechanism audits.

Each turns the user's accountant, trainer or mechanism into a sound verdict on its claimed ε.
"""
