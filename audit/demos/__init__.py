"""Demonstration code for the audits: DP trainers (correct and deliberately broken) and mechanisms."""
