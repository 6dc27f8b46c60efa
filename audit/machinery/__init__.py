"""Run machinery shared by every job: config, run folders, checkpoints, MLflow tracking, policy.

Also loading user code, describing the environment and the executors (local / processes / ray)
that run parallel tasks. Knows nothing about any one job.
"""
