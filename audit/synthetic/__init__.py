"""The `synth-check` job: a user's train, holdout and synthetic files in, the privacy checks out.

The evaluation lives in `audit.statistics.synthetic_evaluation` (shared with the run's sweep).
"""
