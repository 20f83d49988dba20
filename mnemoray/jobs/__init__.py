"""Job entrypoints (`python -m mnemoray.jobs.backfill`) and schedules."""
