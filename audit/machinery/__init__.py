"""Run machinery shared by every job: config, run folders, checkpoints, MLflow tracking, policy.

Also user-code loading, the environment, and executors (local / processes / ray). Knows no job.
"""
