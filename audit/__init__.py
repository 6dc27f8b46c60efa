"""The audit layer: statistics, run machinery and one subpackage per user job, with the CLI on top.

Rooms, lowest first: `errors` (leaf) → `statistics` → `machinery` → jobs (`sweep`, `model_audits`,
`synthetic`, `dp_validation`) → `cli`. A job never imports another job; see docs/architecture.md.
"""
