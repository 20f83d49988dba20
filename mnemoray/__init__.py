"""mnemoray: long-term memory and compiled context for LLM agents, at Ray scale.

Each package's ``__init__`` is its public face (``__all__``); start from these:

- ``mnemoray.memory``: ``MemoryService``, ``Memory``, ``RecallFilters``, ``RecallResult``,
  ``open_backend``;
- ``mnemoray.sessions``: ``Session``, events, ``SQLiteSessionStore``;
- ``mnemoray.compiler``: ``Compiler`` (a model call's context from a session);
- ``mnemoray.backfill``: ``backfill`` (archived sessions into a store, on Ray or not);
- ``mnemoray.client``: the HTTP client; ``mnemoray.adk``, ``mnemoray.mcp``: integrations.

docs/architecture.md draws the layers and says where each rule lives.
"""
