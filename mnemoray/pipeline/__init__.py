"""Ray Data stages and the backfill dataflow (wrap the core objects in mnemoray/)."""
