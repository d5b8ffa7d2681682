"""A minimal Redis client over RESP2 (request/reply, one connection): what the harness needs to check a
server (PING, INFO, DBSIZE, CONFIG GET/SET, SAVE, SHUTDOWN), without a client library."""

from __future__ import annotations

import socket
from typing import Any


class RedisError(Exception):
    """An error reply from the server (e.g. `ERR ...`, `LOADING ...`)."""


class Connection:
    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.reader = self.sock.makefile("rb")

    def close(self) -> None:
        self.reader.close()
        self.sock.close()

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def call(self, *args: Any) -> Any:
        parts = [str(a).encode() if not isinstance(a, bytes) else a for a in args]
        request = b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)
        self.sock.sendall(request)
        return self._reply()

    def _reply(self) -> Any:
        line = self.reader.readline()
        if not line:
            raise ConnectionError("Redis closed the connection")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RedisError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            size = int(rest)
            if size < 0:
                return None
            data = self.reader.read(size + 2)[:-2]
            return data.decode(errors="replace")
        if kind == b"*":
            size = int(rest)
            return None if size < 0 else [self._reply() for _ in range(size)]
        raise ConnectionError(f"unexpected reply from Redis: {line[:60]!r}")

    def info(self, section: str = "") -> dict[str, str]:
        """INFO as a flat mapping; values stay strings."""
        text = self.call("INFO", section) if section else self.call("INFO")
        pairs = (ln.split(":", 1) for ln in text.splitlines() if ":" in ln and not ln.startswith("#"))
        return {k: v.strip() for k, v in pairs}


def parse_info_number(value: str | None) -> float | int | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return int(number) if number.is_integer() and "." not in value else number
