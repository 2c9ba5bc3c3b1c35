#!/usr/bin/env python3
"""echo.py against a real mosquitto, with a paho client in the host's place.

What the daemon cannot check from its side: an answer the broker drops (PUBACK
0x10, no session of the host subscribes) is published again until the host has
subscribed, and given up after --redeliver-for, so that the backend goes on.
Run: python3 -m unittest discover -s examples/mqtt-echo (scripts/test does).
"""
import os
import queue
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

ECHO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "echo.py")
MOSQUITTO = "/usr/sbin/mosquitto"
SESSION_TOPIC = "imagent/host-1/echo/7"


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for(predicate, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"within {seconds} s: {what}")


@unittest.skipUnless(os.access(MOSQUITTO, os.X_OK), "mosquitto is not installed (scripts/bootstrap installs it)")
class EchoRedeliveryTests(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.mkdtemp(prefix="mqtt-echo-")
        self.port = free_port()
        conf = os.path.join(self.directory, "mosquitto.conf")
        with open(conf, "w") as file:
            file.write(f"listener {self.port} 127.0.0.1\nallow_anonymous true\nset_tcp_nodelay true\n")
        self.children = [subprocess.Popen([MOSQUITTO, "-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
        wait_for(self.listening, 10, f"mosquitto listens on {self.port}")
        self.received = queue.Queue()
        self.host = None

    def tearDown(self):
        if self.host is not None:
            self.host.loop_stop()
            self.host.disconnect()
        for child in reversed(self.children):
            child.kill()
            child.wait(timeout=10)
        shutil.rmtree(self.directory, ignore_errors=True)

    def listening(self):
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", self.port)) == 0

    def start_echo(self, *extra):
        self.echo_log = os.path.join(self.directory, "echo.log")
        with open(self.echo_log, "w") as log:
            self.children.append(subprocess.Popen(
                [sys.executable, ECHO, "--port", str(self.port), "--client-id", "echo-test", *extra],
                stdout=log, stderr=subprocess.STDOUT))
        wait_for(lambda: "subscribed" in self.echo_text(), 10, "echo.py subscribes")

    def echo_text(self):
        with open(self.echo_log) as file:
            return file.read()

    def connect_host(self):
        host = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="host-1", protocol=mqtt.MQTTv5)
        host.on_message = lambda client, userdata, message: self.received.put(message)
        host.connect("127.0.0.1", self.port)
        host.loop_start()
        self.host = host
        wait_for(host.is_connected, 10, "the host connects")

    def send_up(self, seq, payload):
        properties = Properties(PacketTypes.PUBLISH)
        properties.UserProperty = [("imagent-seq", str(seq))]
        self.host.publish(SESSION_TOPIC + "/up", payload, qos=1, properties=properties).wait_for_publish(10)

    def subscribe_down(self):
        result, mid = self.host.subscribe(SESSION_TOPIC + "/down", qos=1)
        self.assertEqual(result, mqtt.MQTT_ERR_SUCCESS)

    def next_down(self, seconds=10):
        message = self.received.get(timeout=seconds)
        seq = dict(message.properties.UserProperty).get("imagent-seq")
        return seq, message.payload

    def test_an_answer_nobody_subscribed_to_is_published_again_until_the_host_subscribes(self):
        self.start_echo()
        self.connect_host()
        self.send_up(1, b"first")
        wait_for(lambda: "publishing it again" in self.echo_text(), 10, "echo.py says it publishes the answer again")
        self.assertIn(f"{SESSION_TOPIC}/down seq 1", self.echo_text())
        self.subscribe_down()
        self.assertEqual(self.next_down(), ("1", b"first"))
        # The instance goes on: the next message is answered at once, and nothing came twice.
        self.send_up(2, b"second")
        self.assertEqual(self.next_down(), ("2", b"second"))
        self.assertTrue(self.received.empty())

    def test_an_answer_is_given_up_after_redeliver_for_and_the_next_message_is_answered(self):
        self.start_echo("--redeliver-for", "1.5")
        self.connect_host()
        self.send_up(1, b"lost")
        wait_for(lambda: "gave up" in self.echo_text(), 10, "echo.py gives the answer up")
        self.subscribe_down()
        self.send_up(2, b"after")
        self.assertEqual(self.next_down(), ("2", b"after"))
        time.sleep(0.5)
        self.assertTrue(self.received.empty(), "the given-up answer came after all")


if __name__ == "__main__":
    unittest.main()
