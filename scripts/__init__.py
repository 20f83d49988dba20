"""Maintenance scripts (run from the repo root)."""
