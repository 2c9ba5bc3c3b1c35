#!/usr/bin/env python3
"""Writes the seed inputs of one fuzz target into its corpus directory.

    fuzz/seeds.py TARGET CORPUS

Seeds come from the byte-exact vectors (the shared ones, and the project's
MQTT 5 ones), every vector valid and invalid and all the valid ones back to
back, and from the packaged configuration files. The script-driven targets
(fuzz-mqtt-session, fuzz-ipc-client) read command bytes first, so their
vectors go in as "these bytes from the peer" commands, and each gets one
scripted conversation that reaches past the handshake.
"""
import json
import os
import struct
import sys

SHARED = "../shared/vectors"


def vectors(path):
    data = json.load(open(path))
    entries = data.get("valid", []) + data.get("invalid", [])
    named = [(e["name"], bytes.fromhex(e["hex"])) for e in entries]
    named.append(("all-valid", b"".join(bytes.fromhex(e["hex"]) for e in data.get("valid", []))))
    return named


def peer_bytes(data, marker):
    """One "bytes from the peer" command of the script targets: marker, a 16-bit count, the bytes."""
    out = b""
    while data:
        chunk, data = data[:0xFFFF], data[0xFFFF:]
        out += bytes([marker]) + struct.pack(">H", len(chunk)) + chunk
    return out


# -- MQTT 5, the broker's side ------------------------------------------------

def varint(n):
    out = b""
    while True:
        byte, n = n % 128, n // 128
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out


def mqtt_string(text):
    raw = text.encode()
    return struct.pack(">H", len(raw)) + raw


def mqtt_packet(first, body):
    return bytes([first]) + varint(len(body)) + body


def connack(present=0, receive_maximum=2):
    properties = b"\x21" + struct.pack(">H", receive_maximum)
    return mqtt_packet(0x20, bytes([present, 0]) + varint(len(properties)) + properties)


def publish_down(session, seq, packet_id, service="echo"):
    topic = mqtt_string(f"imagent/agent/{service}/{session}/down")
    properties = b"\x26" + mqtt_string("imagent-seq") + mqtt_string(str(seq))
    return mqtt_packet(0x32, topic + struct.pack(">H", packet_id) + varint(len(properties)) + properties + b"hi")


def mqtt_session_script():
    broker = lambda data: peer_bytes(data, 0x1F)
    return (broker(connack())
            + b"\x60\x00"                                 # OPEN session 1, "echo", RESUME_AFTER 0
            + broker(mqtt_packet(0x90, b"\x00\x01\x00\x01"))  # SUBACK, QoS 1 granted
            + b"\x80\x01\x80\x01\x80\x01"                 # DATA seq 1, 2, 3 on session 1 (two in flight)
            + broker(mqtt_packet(0x40, b"\x00\x02"))       # PUBACK of the first
            + broker(publish_down(1, 1, 10) + publish_down(1, 3, 11) + publish_down(1, 2, 12))
            + b"\xa0\x03"                                 # ACK seq 3 of session 1
            + b"\xe0" + broker(b"\xd0\x00")               # PING, PINGRESP
            + broker(b"\xe0\x00")                         # DISCONNECT (normal): the link goes again
            + broker(connack(present=1)))


# -- Agent IPC/1, the daemon's side ------------------------------------------

def ipc_frame(op, request, records):
    body = struct.pack(">HI", op, request) + b"".join(
        struct.pack(">HI", tag, len(value)) + value for tag, value in records)
    return struct.pack(">I", len(body)) + body


def ipc_client_script():
    daemon = lambda data: peer_bytes(data, 0x3F)
    welcome = ipc_frame(0x8001, 1, [(1, b"\x01"), (3, b"0.1.0"), (4, b"\xff\xff\xff\xff"), (5, b"\x02")])
    result = ipc_frame(0x8010, 2, [(0x22, b'{"link":"connected"}')])
    opened = ipc_frame(0x8002, 3, [(0x10, struct.pack(">Q", 7)), (0x14, b"\x01"), (0x16, bytes(8)),
                                   (0x17, bytes(8)), (0x18, bytes(8))])
    message = ipc_frame(0x9001, 0, [(0x10, struct.pack(">Q", 7)), (0x15, struct.pack(">Q", 1)), (0x1A, b"hi")])
    error = ipc_frame(0xFFFF, 0, [(0x20, b"\x00\x05"), (0x21, b"bye")])
    oversized = struct.pack(">I", 16 * 1024 * 1024 + 65536 + 1) + b"\x90\x01"
    return (daemon(welcome)
            + b"\x80" + daemon(result)                    # STATUS (request 2), its RESULT
            + b"\x82" + daemon(opened)                    # OPEN "echo" (request 3), OPENED
            + b"\x91\xc8"                                 # PING with a 100 ms limit; 400 ms pass
            + daemon(message) + b"\xe0" + daemon(error)
            + daemon(oversized))


def main():
    target, corpus = sys.argv[1], sys.argv[2]
    seeds = {}
    if target == "fuzz-imlink":
        # The IMLink target reads its first byte as a mode switch (odd: fix up CRCs).
        seeds = {name: b"\x00" + data for name, data in vectors(f"{SHARED}/imlink.json")}
    elif target in ("fuzz-ipc", "fuzz-c-ipc"):
        seeds = dict(vectors(f"{SHARED}/ipc.json"))
    elif target == "fuzz-mqtt5":
        seeds = dict(vectors("Tests/MQTT5Tests/vectors/mqtt5.json"))
    elif target == "fuzz-toml":
        for path in ("packaging/imagentd.toml", "packaging/imagentd-user.toml"):
            seeds[os.path.basename(path)] = open(path, "rb").read()
        seeds["syntax"] = (b'# every form the parser takes\n[server]\nendpoints = [\n  "a:1", # one\n  \'b:2\',\n]\n'
                           b'a.b."c d" = 0x1F\n[x.y]\nn = -1_000\nf = 6.5e-1\ns = "\\u00e9\\t"\nt = true\n')
    elif target == "fuzz-mqtt-session":
        seeds = {name: peer_bytes(data, 0x1F) for name, data in vectors("Tests/MQTT5Tests/vectors/mqtt5.json")}
        seeds["script"] = mqtt_session_script()
    elif target == "fuzz-ipc-client":
        seeds = {name: peer_bytes(data, 0x3F) for name, data in vectors(f"{SHARED}/ipc.json")}
        seeds["script"] = ipc_client_script()
    else:
        sys.exit(f"seeds: unknown target {target}")
    for name, data in seeds.items():
        with open(os.path.join(corpus, "seed-" + name), "wb") as out:
            out.write(data)


if __name__ == "__main__":
    main()
