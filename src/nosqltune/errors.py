"""Errors the CLI turns into one-line messages and non-zero exits."""

from __future__ import annotations


class NosqltuneError(Exception):
    """A user-facing failure: str(e) is one line saying the cause."""

    exit_code = 1


class UsageError(NosqltuneError):
    """Bad input: a flag, a value or a file the user gave."""

    exit_code = 2


class SetupError(NosqltuneError):
    """A missing tool (Java, Maven) or an artifact that cannot be resolved."""

    exit_code = 3


class TrialError(NosqltuneError):
    """A trial failed; `kind` says how (SMAC-style distinct failure kinds)."""

    def __init__(self, kind: str, message: str, log_excerpt: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.log_excerpt = log_excerpt
