"""The memory inspector: a static page at ``/ui/`` over the JSON API.

``routes`` serves the page's files; ``browser`` and ``screenshots`` drive it in the
system's Chromium (tests marked ``browser``, ``make demo``'s screenshots).
"""
