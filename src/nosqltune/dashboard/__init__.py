"""The live dashboard: a read-only web page over a study store (data.py: what the page shows, as JSON; server.py:
the Flask app and its server; static/: the page, its script and Plotly.js)."""

from __future__ import annotations

DEFAULT_PORT = 8050
