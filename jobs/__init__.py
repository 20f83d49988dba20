"""Job entrypoints (`python -m jobs.backfill`) and schedules."""
