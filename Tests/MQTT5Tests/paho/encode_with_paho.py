#!/usr/bin/env python3
"""Captures the bytes paho-mqtt's MQTT 5 encoder writes, for PahoCrossCheckTests.

A real paho client connects to a small listener on 127.0.0.1 that answers like
a broker (CONNACK, SUBACK, PUBACK, PUBREC/PUBREL/PUBCOMP, UNSUBACK, PINGRESP)
and records every packet the client sends. The script also packs a CONNACK
property list and a PUBACK with paho's own Properties encoder.

Prints one line per packet: LABEL HEX. Exits non-zero on any failure.
"""
import socket
import sys
import threading
import time

import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode
from paho.mqtt.subscribeoptions import SubscribeOptions

TIMEOUT = 10.0
captured = []          # (type nibble, bytes) in arrival order
captured_changed = threading.Condition()


def read_packet(conn):
    first = conn.recv(1)
    if not first:
        return None
    length, multiplier, header = 0, 1, bytearray(first)
    while True:
        byte = conn.recv(1)[0]
        header.append(byte)
        length += (byte & 0x7F) * multiplier
        multiplier *= 128
        if byte & 0x80 == 0:
            break
    body = b""
    while len(body) < length:
        chunk = conn.recv(length - len(body))
        if not chunk:
            raise EOFError("client closed inside a packet")
        body += chunk
    return bytes(header) + body


def broker(server):
    conn, _ = server.accept()
    conn.settimeout(TIMEOUT)
    while True:
        packet = read_packet(conn)
        if packet is None:
            return
        with captured_changed:
            captured.append(packet)
            captured_changed.notify_all()
        kind = packet[0] >> 4
        if kind == 1:      # CONNECT → CONNACK, Success
            conn.sendall(bytes([0x20, 0x03, 0x00, 0x00, 0x00]))
        elif kind == 8:    # SUBSCRIBE → SUBACK granting each filter's QoS
            pid = packet[2:4]
            conn.sendall(bytes([0x90, 0x05]) + pid + bytes([0x00, 0x01, 0x02]))
        elif kind == 10:   # UNSUBSCRIBE → UNSUBACK
            conn.sendall(bytes([0xB0, 0x05]) + packet[2:4] + bytes([0x00, 0x00, 0x00]))
        elif kind == 3:    # PUBLISH: QoS 1 → PUBACK, QoS 2 → PUBREC
            qos = (packet[0] >> 1) & 3
            topic_length = int.from_bytes(packet[2:4], "big")
            pid = packet[4 + topic_length:6 + topic_length]
            if qos == 1:
                conn.sendall(bytes([0x40, 0x02]) + pid)
            elif qos == 2:
                conn.sendall(bytes([0x50, 0x02]) + pid)
        elif kind == 6:    # PUBREL → PUBCOMP
            conn.sendall(bytes([0x70, 0x02]) + packet[2:4])
        elif kind == 12:   # PINGREQ → PINGRESP
            conn.sendall(bytes([0xD0, 0x00]))
        elif kind == 5:    # PUBREC (the client's, for our QoS 2 PUBLISH) → PUBREL
            conn.sendall(bytes([0x62, 0x02]) + packet[2:4])
        elif kind == 14:   # DISCONNECT
            return
        if kind == 8:
            # Deliver two messages so the client answers with PUBACK, PUBREC and PUBCOMP.
            conn.sendall(bytes([0x32, 0x07, 0x00, 0x01, 0x78, 0x00, 0x07, 0x00, 0x61]))
            conn.sendall(bytes([0x34, 0x07, 0x00, 0x01, 0x78, 0x00, 0x08, 0x00, 0x62]))


def wait_for(count):
    deadline = time.monotonic() + TIMEOUT
    with captured_changed:
        while len(captured) < count:
            left = deadline - time.monotonic()
            if left <= 0:
                sys.exit(f"paho: only {len(captured)} of {count} packets arrived")
            captured_changed.wait(left)


def properties(packet_type, **values):
    props = Properties(packet_type)
    for name, value in values.items():
        setattr(props, name, value)
    return props


def main():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(TIMEOUT)
    thread = threading.Thread(target=broker, args=(server,), daemon=True)
    thread.start()

    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="paho-1", protocol=mqtt.MQTTv5)
    client.username_pw_set("user", "secret")
    client.will_set("w/t", b"bye", qos=1, retain=True,
                    properties=properties(PacketTypes.WILLMESSAGE, WillDelayInterval=5, PayloadFormatIndicator=1,
                                          MessageExpiryInterval=3600, ContentType="text/plain",
                                          ResponseTopic="r", CorrelationData=b"\x01\x02", UserProperty=[("a", "b")]))
    client.connect("127.0.0.1", server.getsockname()[1], keepalive=30, clean_start=False,
                   properties=properties(PacketTypes.CONNECT, SessionExpiryInterval=86400, ReceiveMaximum=20,
                                         MaximumPacketSize=131072, TopicAliasMaximum=10, RequestProblemInformation=1,
                                         UserProperty=[("k", "v")]))
    client.loop_start()
    wait_for(1)
    client.subscribe([("imagent/c1/+/+/down", SubscribeOptions(qos=1)),
                      ("$share/g/a/#", SubscribeOptions(qos=2, retainAsPublished=True, retainHandling=2)),
                      ("a", SubscribeOptions(qos=0, noLocal=True, retainHandling=1))],
                     properties=properties(PacketTypes.SUBSCRIBE, SubscriptionIdentifier=5))
    wait_for(5)  # SUBSCRIBE, then the client's PUBACK, PUBREC and PUBCOMP for the two deliveries
    client.publish("imagent/c1/echo/7/up", b"ping", qos=1,
                   properties=properties(PacketTypes.PUBLISH, UserProperty=[("imagent-seq", "42")])).wait_for_publish(TIMEOUT)
    client.publish("a/b", b"hi", qos=0).wait_for_publish(TIMEOUT)
    client.publish("t", b"", qos=2, retain=True,
                   properties=properties(PacketTypes.PUBLISH, PayloadFormatIndicator=1, MessageExpiryInterval=10,
                                         ContentType="a", ResponseTopic="r/1", CorrelationData=b"\xbe\xef")).wait_for_publish(TIMEOUT)
    client.unsubscribe(["a/+", "#"])
    wait_for(10)  # three PUBLISH, PUBREL, UNSUBSCRIBE
    client._send_pingreq()
    wait_for(11)
    # The listener records PINGREQ before it answers: until paho has read the PINGRESP (it sets
    # _ping_t back to 0), a DISCONNECT and close could reset the connection under the listener's
    # answer, and the DISCONNECT would be lost with it (seen once in CI).
    deadline = time.monotonic() + TIMEOUT
    while getattr(client, "_ping_t", 0) and time.monotonic() < deadline:
        time.sleep(0.01)
    client.disconnect(reasoncode=ReasonCode(PacketTypes.DISCONNECT, "Disconnect with will message"),
                      properties=properties(PacketTypes.DISCONNECT, SessionExpiryInterval=0, ReasonString="bye"))
    thread.join(TIMEOUT)
    client.loop_stop()
    if thread.is_alive():
        sys.exit("paho: the listener did not see DISCONNECT")

    names = {1: "connect", 3: "publish", 4: "puback", 5: "pubrec", 6: "pubrel", 7: "pubcomp", 8: "subscribe",
             10: "unsubscribe", 12: "pingreq", 14: "disconnect"}
    for index, packet in enumerate(captured):
        print(f"client-{index}-{names.get(packet[0] >> 4, 'unknown')} {packet.hex()}")

    # Paho's property encoder on its own: a CONNACK and a PUBACK built around lists it packed.
    connack_properties = properties(PacketTypes.CONNACK, SessionExpiryInterval=0, ReceiveMaximum=100, MaximumQoS=1,
                                    RetainAvailable=0, MaximumPacketSize=131072, AssignedClientIdentifier="x1",
                                    TopicAliasMaximum=8, ReasonString="ok", UserProperty=[("s", "1")],
                                    WildcardSubscriptionAvailable=1, SubscriptionIdentifierAvailable=0,
                                    SharedSubscriptionAvailable=1, ServerKeepAlive=120, ResponseInformation="ri",
                                    ServerReference="b:1883", AuthenticationMethod="SCRAM",
                                    AuthenticationData=b"\x01").pack()
    body = bytes([0x00, 0x00]) + connack_properties
    print("packed-connack " + (bytes([0x20]) + encode_length(len(body)) + body).hex())
    puback_properties = properties(PacketTypes.PUBACK, ReasonString="quota").pack()
    body = bytes([0x00, 0x02, 0x97]) + puback_properties
    print("packed-puback " + (bytes([0x40]) + encode_length(len(body)) + body).hex())


def encode_length(length):
    # paho's own Variable Byte Integer encoder
    from paho.mqtt.properties import VariableByteIntegers
    return VariableByteIntegers.encode(length)


if __name__ == "__main__":
    main()
