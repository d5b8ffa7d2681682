"""The command reference (docs/reference.md), rendered as Markdown from the command line's own parsers.

`make reference` writes it (`python -m nosqltune.cli.reference docs/reference.md`) and `make docs` does so before
building the site; tests/unit/test_docs.py fails when the committed file differs from what the parsers render
now, so a flag cannot change without its documentation. Only the parsers' own words are used: each command's
help line and description, and each flag's names, value and help. Defaults appear where the help states them
(a default computed on the machine would make the file differ from one machine to the next)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path

from . import build_parser

HEADER = """# Command reference

Every command and flag of `nosqltune`, rendered from the command line's own parsers by
`make reference` (`src/nosqltune/cli/reference.py`); a unit test fails when this page differs from what
the parsers say now. `nosqltune COMMAND --help` prints the same in the terminal.
"""


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[
        tuple[tuple[str, ...], argparse.ArgumentParser, str]]:
    """(command path, its parser, its one-line help) for every command and subcommand, depth first in the order
    the parsers declare them; the top-level parser itself is not one."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield (*path, name), sub, helps.get(name, "")
                yield from commands(sub, (*path, name))


def documented_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The parser's positional arguments and flags a user sees (`--help` and hidden ones left out)."""
    return [a for a in parser._actions
            if a.help is not argparse.SUPPRESS and not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]


def _help_text(action: argparse.Action, prog: str) -> str:
    text = action.help or ""
    if "%" in text:   # argparse's own expansion: %(default)s, %(choices)s, %(prog)s
        params = {k: v for k, v in vars(action).items() if v is not argparse.SUPPRESS}
        params["prog"] = prog
        if params.get("choices") is not None:
            params["choices"] = ", ".join(map(str, params["choices"]))
        text = text % params
    return " ".join(text.split())


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell: no pipes, no HTML tags, no stray emphasis."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace("*", "\\*")


def _value(action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""
    if action.choices is not None and not isinstance(action.choices, dict):
        shown = "{" + ",".join(map(str, action.choices)) + "}"
    else:
        shown = action.metavar if isinstance(action.metavar, str) else action.dest.upper()
    if action.nargs in ("*", "+", "?"):
        shown += {"*": " ...", "+": " [...]", "?": " (optional)"}[action.nargs]
    return f"`{shown}`"


def _description(text: str) -> list[str]:
    """A description as Markdown: its prose joined into paragraphs, its indented lines (examples) as code."""
    out: list[str] = []
    for paragraph in text.strip().split("\n\n"):
        prose: list[str] = []
        code: list[str] = []
        for line in paragraph.splitlines():
            if line.startswith((" ", "\t")):
                if prose:
                    out += [_cell_free(" ".join(prose)), ""]
                    prose = []
                code.append(line.strip())
            else:
                if code:
                    out += ["```text", *code, "```", ""]
                    code = []
                prose.append(line.strip())
        if prose:
            out += [_cell_free(" ".join(prose)), ""]
        if code:
            out += ["```text", *code, "```", ""]
    return out


def _cell_free(text: str) -> str:
    return " ".join(text.split()).replace("<", "&lt;").replace("*", "\\*")


def render(parser: argparse.ArgumentParser | None = None) -> str:
    """The whole reference page."""
    parser = parser or build_parser()
    lines = [HEADER]
    for path, sub, summary in commands(parser):
        name = " ".join(("nosqltune", *path))
        lines += [f"## {name}", ""]
        if summary:
            lines += [_cell_free(summary[0].upper() + summary[1:]) + ".", ""]
        if sub.description:
            lines += _description(sub.description)
        subcommands = [p for p, _, _ in commands(sub) if len(p) == 1]
        if subcommands:
            lines += ["Subcommands: " + ", ".join(f"`{name} {p[0]}`" for p in subcommands) + ".", ""]
        actions = documented_actions(sub)
        if actions:
            lines += ["| argument | value | what it does |", "|---|---|---|"]
            for action in actions:
                names = ", ".join(f"`{o}`" for o in action.option_strings) or f"`{action.metavar or action.dest}`"
                lines.append(f"| {names} | {_value(action)} | {_cell(_help_text(action, sub.prog))} |")
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    text = render()
    if not argv or argv[0] == "-":
        sys.stdout.write(text)
    else:
        Path(argv[0]).write_text(text)
        print(f"{argv[0]}: {sum(1 for _ in commands(build_parser()))} commands")
    return 0


if __name__ == "__main__":
    sys.exit(main())
