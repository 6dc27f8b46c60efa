"""Run machinery shared by every job: config, run folders, checkpoints, MLflow tracking, policy.

Also loading user code and describing the environment. Knows nothing about any one job.
"""
