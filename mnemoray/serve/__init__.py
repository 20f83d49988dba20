"""Ray Serve deployments and the HTTP API (FastAPI ingress)."""
