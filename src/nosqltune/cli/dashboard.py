"""`nosqltune dashboard`: a live, read-only web page over a study store."""

from __future__ import annotations

import argparse

from .options import DEFAULT_STUDY


def cmd_dashboard(args: argparse.Namespace) -> int:
    from ..dashboard.server import serve
    from ..errors import UsageError
    from ..store import open_reader, public_url

    if not 0 < args.port < 65536:
        raise UsageError(f"--port {args.port}: give a port from 1 to 65535")
    store = open_reader(args.study)
    try:
        serve(store, source=public_url(args.study), host=args.host, port=args.port, study_name=args.study_name)
    except KeyboardInterrupt:
        pass
    finally:
        store.close()
    return 0


def add_parsers(sub) -> None:
    from ..dashboard import DEFAULT_PORT

    p = sub.add_parser(
        "dashboard", help="a live web page of a store's studies (read-only; updates while tune or compare run)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Serve a page on http://localhost:PORT/ that shows each tuning study of the store as it runs: "
                    "the best so far against the default and its confirmation, every trial's value (failed ones "
                    "with their reason), the running trial's phase, parallel coordinates of the knobs against the "
                    "objective, knob importance, the node's CPU, disk and bottleneck per trial, the comparisons "
                    "with their verdicts and intervals, the machine time's split and a table of trials to sort "
                    "and filter. The page asks for new trials every 2 s; the store is opened read-only. It "
                    "listens on 127.0.0.1 unless --host names another address (the page has no authentication)."
                    "\n\nExamples:\n"
                    "  nosqltune dashboard --study runs/a.db\n"
                    "  nosqltune dashboard --study runs/a.db --study-name tune-gp --port 8060\n"
                    "  nosqltune dashboard --study postgresql://tuner@db:5432/studies --host 0.0.0.0")
    p.add_argument("--study", default=DEFAULT_STUDY, metavar="PATH_OR_URL",
                   help=f"trial store: SQLite path or postgresql:// URL (default {DEFAULT_STUDY})")
    p.add_argument("--study-name", default=None, help="the study shown first (default: the store's first)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port to listen on (default {DEFAULT_PORT})")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only; any other is warned about)")
    p.set_defaults(func=cmd_dashboard)
