"""irace's target-runner: `irace_runner configID instanceID seed instance [switches...]`.

Sends the request to the tuning loop over the Unix socket named by NOSQLTUNE_IRACE_SOCKET, waits for the
trial to be run and stored, and prints only the cost, as irace expects. Any problem goes to stderr with a
non-zero exit, which makes irace stop (the loop then reports it)."""

from __future__ import annotations

import json
import os
import socket
import sys


def main(argv: list[str]) -> int:
    path = os.environ.get("NOSQLTUNE_IRACE_SOCKET")
    if not path:
        print("irace_runner: NOSQLTUNE_IRACE_SOCKET is not set (run irace through nosqltune tune)", file=sys.stderr)
        return 2
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        try:
            conn.connect(path)
            conn.sendall((json.dumps({"argv": argv}) + "\n").encode())
            data = b""
            while not data.endswith(b"\n"):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
        except OSError as exc:
            print(f"irace_runner: lost the tuning loop: {exc}", file=sys.stderr)
            return 1
    if not data:
        print("irace_runner: the tuning loop closed the connection", file=sys.stderr)
        return 1
    reply = json.loads(data)
    if "cost" not in reply:
        print(f"irace_runner: {reply.get('error', 'no cost')}", file=sys.stderr)
        return 1
    print(repr(float(reply["cost"])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
