"""The nosqltune command line: one module per command (its parser and its run function) over the library.

Only this package knows argparse; it turns flags into the typed settings the library takes. Nothing in the
library imports it."""

from __future__ import annotations

import argparse
import os
import sys

from .. import __version__
from ..errors import NosqltuneError

COMMANDS = ("bench", "tune", "collect", "importance", "model", "recommend", "compare", "report", "dashboard", "export", "export_config", "online", "rollout", "node", "cluster", "knobs", "scenarios", "volumes", "datasets", "capture", "calibrate", "setup")


class Parser(argparse.ArgumentParser):
    """argparse's parser with its own errors (an unknown flag, a value of the wrong type, a missing argument) in
    the form of every other bad input: one line, exit 2, saying where the command's help is."""

    def error(self, message: str):
        self.exit(2, f"nosqltune: error: {message}; see `{self.prog} --help`\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="nosqltune",
        description="Tune NoSQL datastores with real benchmark trials. Every trial is cold: the node boots "
                    "on a restored copy of the loaded data, the client warms up, then the workload is measured.")
    parser.add_argument("--version", action="version", version=f"nosqltune {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    import importlib

    for name in COMMANDS:   # `tune` registers `best` too
        importlib.import_module(f"{__name__}.{name}").add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from ..runtime.process import install_signal_handlers, reap_all

    parser = build_parser()
    args = parser.parse_args(argv)
    # a store's password goes to libpq's environment at once, never into output, the store or a command line
    for name in ("study", "from_study"):
        if getattr(args, name, None):
            setattr(args, name, _password_to_environment(getattr(args, name)))
    if argv is None and getattr(args, "command", None) == "tune" and os.environ.get("PYTHONHASHSEED") != "0":
        # SMAC (through ConfigSpace) iterates over sets of configurations, whose order follows Python's
        # per-process string hashing: fixed hashing makes a tuning run repeatable, and a resumed run (a new
        # process) replays exactly the suggestions of the interrupted one
        os.execve(sys.executable, [sys.executable, "-m", "nosqltune", *map(_without_password, sys.argv[1:])],
                  {**os.environ, "PYTHONHASHSEED": "0"})
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    install_signal_handlers()
    try:
        return args.func(args)
    except NosqltuneError as exc:
        print(f"nosqltune: error: {exc}", file=sys.stderr)
        return getattr(exc, "exit_code", 1)
    except KeyboardInterrupt:
        print("nosqltune: interrupted; nodes stopped", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `nosqltune knobs | head`
        sys.stderr.close()
        return 0
    finally:
        reap_all()


def _password_to_environment(url: str) -> str:
    """A PostgreSQL study URL's password moved into PGPASSWORD (libpq reads it from there; child processes
    inherit it): what the commands print, store and pass on is the URL without it."""
    from ..store import is_server_url, public_url

    if is_server_url(url):
        from urllib.parse import parse_qs, unquote, urlsplit

        parts = urlsplit(url)
        password = parts.password or (parse_qs(parts.query).get("password") or [None])[0]
        if password:
            os.environ["PGPASSWORD"] = unquote(password) if parts.password else password
            from ..runtime.process import hide_from_children

            hide_from_children("PGPASSWORD")   # the store's, not for the datastores or a target's commands
        return public_url(url)
    return url


def _without_password(arg: str) -> str:
    """A command-line word with a PostgreSQL URL's password taken out (the URL may be glued to its flag)."""
    from ..store import is_server_url, public_url

    flag, eq, value = arg.partition("=")
    if eq and flag.startswith("--") and is_server_url(value):
        return f"{flag}={public_url(value)}"
    return public_url(arg) if is_server_url(arg) else arg


if __name__ == "__main__":
    sys.exit(main())
