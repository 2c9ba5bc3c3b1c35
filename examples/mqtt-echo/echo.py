#!/usr/bin/env python3
"""An echo backend for imagentd's MQTT 5 upstream (imagent-mqtt(7)).

It answers every message a local program sends on a session of service
SERVICE, on any host, with the same payload. Several instances may run at
once: they share one subscription ($share/GROUP/...), so the broker hands each
message to one of them.

The contract it keeps (imagent-mqtt(7), BACKEND CONTRACT):
  * a message arrives on {prefix}/{client}/{service}/{session}/up with the user
    property imagent-seq; the same seq may come more than once;
  * the answer goes to {prefix}/{client}/{service}/{session}/down with its own
    imagent-seq, numbered per session from 1. An echo answers up seq n with
    down seq n, so a repeated message gives a repeated answer that the daemon
    drops by its seq, and no instance needs to remember anything;
  * the up message is acknowledged (PUBACK) only after the broker took the
    answer, so a backend that dies in between gets the message again;
  * an answer the broker drops (PUBACK 0x10 No matching subscribers: it holds
    no session for the host, which subscribes again at its next CONNACK; or a
    failure code) is published again after a pause, 1 s doubling to 30 s, for
    up to --redeliver-for seconds; its up message stays unacknowledged
    meanwhile.

Usage: echo.py [--host H] [--port P] [--prefix imagent] [--service echo]
               [--group echo] [--client-id ID] [--username U --password P]
               [--cafile CA.pem] [--redeliver-for SECONDS] [--sink]
"""
import argparse
import signal
import socket
import sys
import threading
import time

import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

SEQ = "imagent-seq"
NO_MATCHING_SUBSCRIBERS = 0x10


def main():
    parser = argparse.ArgumentParser(description="imagent MQTT echo backend")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=1883)
    parser.add_argument("--prefix", default="imagent", help="[mqtt] topic_prefix of the hosts")
    parser.add_argument("--service", default="echo", help="the service name the local programs open")
    parser.add_argument("--group", default="imagent-echo", help="shared subscription group")
    parser.add_argument("--client-id", default="imagent-echo-1", help="unique per instance")
    parser.add_argument("--username")
    parser.add_argument("--password")
    parser.add_argument("--cafile", help="CA bundle: connect with TLS")
    parser.add_argument("--session-expiry", type=int, default=3600,
                        help="seconds the broker keeps this instance's queue while it is away")
    parser.add_argument("--redeliver-for", type=float, default=3600,
                        help="seconds an answer the broker dropped is published again before it is given up")
    parser.add_argument("--sink", action="store_true",
                        help="acknowledge without answering (a sink, for benchmarks)")
    args = parser.parse_args()

    up_filter = f"$share/{args.group}/{args.prefix}/+/{args.service}/+/up"
    # The mid of each answer in flight → the answer (with the up message it answers).
    answering = {}
    # PUBACKs of answers whose publish() has not returned yet (published again from a timer's thread).
    early = {}
    lock = threading.Lock()

    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=args.client_id,
                         protocol=mqtt.MQTTv5, manual_ack=True)
    if args.username:
        client.username_pw_set(args.username, args.password)
    if args.cafile:
        client.tls_set(ca_certs=args.cafile)

    def on_connect(client, userdata, flags, reason_code, properties):
        if reason_code.is_failure:
            print(f"echo: broker refused: {reason_code}", file=sys.stderr, flush=True)
            return
        # Subscribing again when the broker kept the session is harmless.
        client.subscribe(up_filter, qos=1)
        print(f"echo: connected, subscribed to {up_filter}", flush=True)

    def on_message(client, userdata, message):
        seq = dict(message.properties.UserProperty if hasattr(message.properties, "UserProperty") else []).get(SEQ)
        levels = message.topic.split("/")
        if seq is None or levels[-1] != "up":
            client.ack(message.mid, message.qos)  # not ours to answer; never again
            return
        if args.sink:
            client.ack(message.mid, message.qos)
            return
        answer = {"topic": "/".join(levels[:-1] + ["down"]), "seq": seq, "payload": message.payload,
                  "up": (message.mid, message.qos), "first": time.monotonic(), "attempt": 0}
        publish(answer)

    def publish(answer):
        properties = Properties(PacketTypes.PUBLISH)
        properties.UserProperty = [(SEQ, answer["seq"])]
        info = client.publish(answer["topic"], answer["payload"], qos=1, properties=properties)
        with lock:
            reason_code = early.pop(info.mid, None)
            if reason_code is None:
                answering[info.mid] = answer
                return
        settle(answer, reason_code)

    def on_publish(client, userdata, mid, reason_code, properties):
        with lock:
            answer = answering.pop(mid, None)
            if answer is None:
                early[mid] = reason_code
                return
        settle(answer, reason_code)

    def settle(answer, reason_code):
        code = getattr(reason_code, "value", 0)
        if code != NO_MATCHING_SUBSCRIBERS and code < 0x80:
            client.ack(*answer["up"])
            return
        # The broker dropped the answer: no session of the host subscribes to it now (the broker
        # lost it in a restart or a crash, or it expired), or the broker refused it. Published
        # again, the answer reaches the host once it has subscribed again.
        what = f"the answer on {answer['topic']} seq {answer['seq']}: PUBACK {reason_code} (0x{code:02x})"
        if time.monotonic() - answer["first"] >= args.redeliver_for:
            print(f"echo: gave up {what} after {args.redeliver_for:g} s; that session waits at this seq",
                  file=sys.stderr, flush=True)
            client.ack(*answer["up"])
            return
        delay = min(2 ** answer["attempt"], 30)
        answer["attempt"] += 1
        print(f"echo: {what}; publishing it again in {delay} s", file=sys.stderr, flush=True)
        timer = threading.Timer(delay, publish, args=(answer,))
        timer.daemon = True
        timer.start()

    def on_socket_open(client, userdata, sock):
        # paho leaves Nagle's algorithm on: an answer or a PUBACK then waits for the
        # broker's delayed ACK (up to 40 ms on Linux). Off, one instance answers twice as fast.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    client.reconnect_delay_set(min_delay=1, max_delay=5)
    client.on_socket_open = on_socket_open
    client.on_connect = on_connect
    client.on_message = on_message
    client.on_publish = on_publish
    connect_properties = Properties(PacketTypes.CONNECT)
    connect_properties.SessionExpiryInterval = args.session_expiry
    signal.signal(signal.SIGTERM, lambda *_: client.disconnect())
    client.connect(args.host, args.port, keepalive=30, clean_start=False, properties=connect_properties)
    client.loop_forever(retry_first_connection=True)


if __name__ == "__main__":
    main()
