#!/usr/bin/env python3
"""A small imagentd client on the `imagent` package (clients/python).

    imagent_client.py [--socket PATH] status        # the daemon's STATUS document
    imagent_client.py [--socket PATH] ping          # round trip to the daemon
    imagent_client.py [--socket PATH] echo SERVICE TEXT...
        # opens a session to SERVICE, sends each TEXT, prints what comes back
        # (with the reference server's "echo" service: the same texts), acks it,
        # and closes the session

Runs with the package installed (pip install clients/python) or from the source
tree. Exit status: 0 on success, 2 when no daemon answers, 4 when the daemon
answers ERROR.
"""

import json
import os
import sys

try:
    import imagent
except ImportError:  # not installed: the package beside this example in the source tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python", "src"))
    import imagent


def echo(client: imagent.Client, service: str, texts: list[str]) -> int:
    session = client.open(service)
    for text in texts:
        session.send(text.encode())
    for _ in texts:
        message = session.receive(timeout=10)
        if message is None:
            print("no answer within 10 s", file=sys.stderr)
            return 1
        print(message.payload.decode(errors="replace"))
        message.ack()
    session.close()
    return 0


def main(argv: list[str]) -> int:
    path = None
    if len(argv) >= 2 and argv[0] == "--socket":
        path, argv = argv[1], argv[2:]
    if not argv or argv[0] not in ("status", "ping", "echo") or (argv[0] == "echo" and len(argv) < 3):
        print(__doc__.strip(), file=sys.stderr)
        return 1
    try:
        with imagent.connect(path, "imagent-example") as client:
            if argv[0] == "status":
                print(json.dumps(client.status()))
            elif argv[0] == "ping":
                print(f"pong from imagentd {client.daemon_version}: {client.ping() * 1000:.3f} ms")
            else:
                return echo(client, argv[1], argv[2:])
    except imagent.DaemonUnavailable as error:
        print(f"imagentd is not running: {error}", file=sys.stderr)
        return 2
    except imagent.IPCError as error:
        print(f"imagentd refused: {error}", file=sys.stderr)
        return 4
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
