"""The HTTP API's request and response models, shared by the server (``serve/``) and the
clients (``mnemoray.client``, the MCP server), so both sides speak one typed format.

Every request model forbids unknown fields, so a typo ("topk") is a 422 naming the
field rather than a silently applied default. Limits are module constants
(documented in the OpenAPI schema through the field constraints); the whole body is
capped separately (``server.max_body_bytes`` -> 413).

Convention for tenant fields: requests with a JSON body (POST/PUT) carry ``app_name``
and ``user_id`` in the body; GET and DELETE carry them in the path or the query
string. Artifacts are addressed by path.

Modules: ``common`` (limits, ids, the request base, errors), ``memories`` (recall,
add, list, forget), ``hygiene`` (edit, versions, forget by query, forget records),
``sessions`` (sessions, jobs, artifacts) and ``compile``.
"""
