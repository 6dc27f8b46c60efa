"""Conformance core: checks that DP-SGD code does what its accountant assumes, on live Opacus objects.

Shared by `conformance --factory` (audit/dp_validation) and the main job's own training (audit/sweep).
"""
