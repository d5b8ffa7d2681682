"""The dashboard's web server: a Flask app over a StudyFeed (the page, its assets, two JSON endpoints), served by
Werkzeug's threaded server on one address.

Flask is imported only here, when `nosqltune dashboard` runs. The page is static (dashboard/static/: HTML, its
script and style, Plotly.js shipped in the package): nothing is fetched from the network at run time."""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any, Callable

from ..errors import UsageError
from . import DEFAULT_PORT
from .data import StudyFeed, encode

STATIC = Path(__file__).resolve().parent / "static"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
POLL_MS = 2000    # how often the page asks for the trials changed since its last answer


def make_app(feed: StudyFeed, *, source: str, study_name: str | None = None, poll_ms: int = POLL_MS):
    """The Flask app: / (the page), /static/..., /api/studies and /api/study/<name>?after=<cursor>."""
    try:
        from flask import Flask, jsonify, request, send_from_directory
    except ImportError:
        raise UsageError("the dashboard needs Flask: pip install 'nosqltune[dashboard]' (make setup installs "
                         "it)") from None

    from flask.json.provider import JSONProvider

    class Encoded(JSONProvider):   # jsonify through data.encode: the page's answers are made one way
        def dumps(self, obj: Any, **kwargs: Any) -> str:
            return encode(obj).decode()

        def loads(self, s: str | bytes, **kwargs: Any) -> Any:
            return json.loads(s)

    app = Flask("nosqltune.dashboard", static_folder=str(STATIC), static_url_path="/static")
    app.json = Encoded(app)

    @app.after_request
    def no_store(response):   # the answers change while a study runs: never from a cache
        if request.path.startswith("/api/"):
            response.headers["Cache-Control"] = "no-store"
        return response

    @app.get("/")
    def index():
        return send_from_directory(STATIC, "index.html")

    @app.get("/api/studies")
    def studies():
        return jsonify({"source": source, "studies": feed.studies(), "preselect": study_name, "poll_ms": poll_ms})

    @app.get("/api/study/<path:name>")
    def study(name: str):
        try:
            return jsonify(feed.study(name, request.args.get("after") or None))
        except UsageError as exc:
            return jsonify({"error": str(exc)}), 404

    return app


def bind(app, host: str, port: int):
    """Werkzeug's threaded server on host:port, bound now (so a taken port is said at once, in one line)."""
    import socket

    from werkzeug.serving import make_server

    try:
        if port:   # Werkzeug says a taken port in lines of its own and exits: ask first, as it binds
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind((host, port))
        return make_server(host, port, app, threaded=True)
    except socket.gaierror as exc:
        raise UsageError(f"cannot listen on {host}:{port} ({exc.strerror or exc}): give --host an address of this "
                         "machine") from None
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise UsageError(f"port {port} on {host} is taken (another dashboard?): give another --port") from None
        if exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
            raise UsageError(f"cannot listen on {host}:{port} ({exc.strerror or exc}): give --host an address of "
                             "this machine") from None
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def serve(store, *, source: str, host: str = "127.0.0.1", port: int = DEFAULT_PORT, study_name: str | None = None,
          say: Callable[[str], None] = print, ready: Callable[[Any], None] | None = None,
          poll_ms: int = POLL_MS) -> None:
    """Serve the dashboard of `store` (opened read-only by the caller) until interrupted. `ready(server)` is called
    once it listens (tests stop it with server.shutdown())."""
    feed = StudyFeed(store)
    app = make_app(feed, source=source, study_name=study_name, poll_ms=poll_ms)
    server = bind(app, host, port)
    feed.read_ahead(study_name)
    if host not in LOOPBACK:
        say(f"warning: the dashboard listens on {host}:{port} and has no authentication: anyone who reaches this "
            "address can read the study")
    shown = "localhost" if host in LOOPBACK else host
    say(f"dashboard of {source}: http://{shown}:{server.server_port}/ (read-only; Ctrl-C stops it)")
    if ready is not None:
        ready(server)
    try:
        server.serve_forever()
    finally:
        server.server_close()
