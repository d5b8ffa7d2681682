"""The one text table of the commands' output: columns padded to their widest cell, two spaces apart."""

from __future__ import annotations

from collections.abc import Sequence


def text_table(rows: Sequence[Sequence[str]], right: frozenset[int] | set[int] = frozenset(),
                 free_last: bool = False) -> str:
    """`rows` (the header first) as lines. Columns whose index is in `right` align right (numbers), the others
    left; with `free_last` the last column is not padded (a long description runs on)."""
    if not rows:
        return ""
    padded = len(rows[0]) - 1 if free_last else len(rows[0])
    widths = [max(len(row[i]) for row in rows) for i in range(padded)]
    lines = []
    for row in rows:
        cells = [row[i].rjust(w) if i in right else row[i].ljust(w) for i, w in enumerate(widths)]
        if free_last:
            cells.append(row[-1])
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)
