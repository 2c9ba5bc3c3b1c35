#!/usr/bin/env python3
"""The imagent package's driver for the client conformance suite.

The contract is clients/conformance/README.md: one JSON object per line on
stdout (flushed), the last one the report. Written on the package's public API
alone. The stream scenarios use the blocking API, or the asyncio one with
--aio; `sessions` always uses asyncio (1000 sessions opened at once), so the
suite exercises both.

    conformance_driver.py --socket PATH SCENARIO [--service NAME] [--messages N]
        [--size BYTES] [--sessions K] [--session ID] [--timeout-ms MS] [--aio]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import struct
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

sys.dont_write_bytecode = True  # the harness runs this as root too: leave the tree as it is

import imagent  # noqa: E402
import imagent.aio  # noqa: E402

_COUNTER = struct.Struct(">Q")


def emit(**fields: Any) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def payload(number: int, size: int) -> bytes:
    """Message `number`: the number as a big-endian u64, then the byte number % 251."""
    return _COUNTER.pack(number) + bytes((number % 251,)) * (size - 8)


def counter_of(data: bytes, size: int) -> int | None:
    """The message's number, or None when its bytes are not those of that number."""
    if len(data) != size:
        return None
    (number,) = _COUNTER.unpack_from(data)
    fill = bytes((number % 251,))
    return number if data.count(fill, 8) == size - 8 else None


class Stream:
    """The stream report's counts for one session."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.sent = 0
        self.seqs: list[int] = []
        self.next = 1
        self.received = 0
        self.duplicates = 0
        self.gaps = 0
        self.corrupt = 0
        self.errors: Counter[str] = Counter()

    def check(self, data: bytes) -> None:
        number = counter_of(data, self.size)
        if number is None:
            self.corrupt += 1
        elif number < self.next:
            self.duplicates += 1
        elif number == self.next:
            self.received += 1
            self.next += 1
        else:
            self.gaps += 1
            self.next = number + 1

    def error(self, error: BaseException) -> None:
        self.errors[imagent.error_name(error)] += 1

    def report(self, scenario: str, **extra: Any) -> dict[str, Any]:
        return dict(scenario=scenario, sent=self.sent,
                    seqs_in_order=all(seq == index + 1 for index, seq in enumerate(self.seqs)),
                    received=self.received, duplicates=self.duplicates, gaps=self.gaps, corrupt=self.corrupt,
                    errors=dict(self.errors), **extra)


class Deadline:
    def __init__(self, milliseconds: int) -> None:
        self.end = time.monotonic() + milliseconds / 1000

    def left(self) -> float:
        return max(0.0, self.end - time.monotonic())


# MARK: The two APIs behind one face, for the stream scenarios


class Blocking:
    """The blocking API."""

    def __init__(self, socket: str) -> None:
        self.client = imagent.connect(socket, "imagent-conformance-python")

    def open(self, service: str, timeout: float) -> imagent.Session:
        return self.client.open(service, timeout=timeout)

    def send(self, session: Any, data: bytes, timeout: float) -> int:
        seq: int = session.send(data, timeout=timeout)
        return seq

    def receive(self, session: Any, timeout: float) -> imagent.Message | None:
        message: imagent.Message | None = session.receive(timeout)
        return message

    def close(self) -> None:
        self.client.close()


class Aio:
    """The asyncio API, each call awaited in turn on this driver's loop."""

    def __init__(self, socket: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.client = self.loop.run_until_complete(imagent.aio.connect(socket, "imagent-conformance-python-aio"))

    def open(self, service: str, timeout: float) -> imagent.aio.Session:
        return self.loop.run_until_complete(self.client.open(service, timeout=timeout))

    def send(self, session: Any, data: bytes, timeout: float) -> int:
        seq: int = self.loop.run_until_complete(session.send(data, timeout=timeout))
        return seq

    def receive(self, session: Any, timeout: float) -> imagent.Message | None:
        message: imagent.Message | None = self.loop.run_until_complete(session.receive(timeout))
        return message

    def close(self) -> None:
        self.loop.run_until_complete(self.client.close())
        self.loop.close()


def poll(api: Blocking | Aio, session: Any, stream: Stream, received: Callable[[], None] = lambda: None) -> None:
    """Receives and acknowledges what is already there."""
    while True:
        try:
            message = api.receive(session, 0)
        except imagent.DaemonUnavailable:
            return  # gone for now: the next send waits through the restart
        if message is None:
            return
        stream.check(message.payload)
        message.ack()
        received()


def receive_rest(api: Blocking | Aio, session: Any, stream: Stream, last: int, deadline: Deadline,
                 received: Callable[[], None] = lambda: None) -> None:
    """Receives until message `last` is in (or past) or the time is up."""
    while stream.next <= last and deadline.left() > 0:
        try:
            message = api.receive(session, deadline.left())
        except imagent.Error as error:
            stream.error(error)
            if isinstance(error, imagent.IPCError):
                return
            continue
        if message is None:
            return
        stream.check(message.payload)
        message.ack()
        received()


def run_stream(api: Blocking | Aio, options: argparse.Namespace, deadline: Deadline) -> dict[str, Any]:
    scenario = options.scenario
    stream = Stream(options.size)
    session = api.open(options.service, deadline.left())
    accepted_before_full: int | None = None
    progress_mark = [0]

    def received() -> None:
        if scenario == "stream" and stream.received >= progress_mark[0] + 500:
            progress_mark[0] = stream.received - stream.received % 500
            emit(event="progress", sent=stream.sent, received=stream.received)

    for number in range(1, options.messages + 1):
        data = payload(number, options.size)
        while True:
            try:
                stream.seqs.append(api.send(session, data, deadline.left()))
                stream.sent += 1
                break
            except imagent.QueueFull as error:
                stream.error(error)
                if scenario != "queue-full":
                    break
                if accepted_before_full is None:
                    accepted_before_full = stream.sent
                    emit(event="queue_full", accepted=stream.sent)
                time.sleep(0.05)
                if deadline.left() <= 0:
                    break
            except imagent.Error as error:
                stream.error(error)
                break
        if stream.sent < number:
            break  # refused for good: what came back is the report
        if scenario != "server-down":
            poll(api, session, stream, received)
    if scenario == "server-down":
        emit(event="accepted", count=stream.sent)
    receive_rest(api, session, stream, stream.sent, deadline, received)
    extra: dict[str, Any] = {}
    if scenario == "queue-full":
        extra["accepted_before_full"] = accepted_before_full if accepted_before_full is not None else stream.sent
    if scenario == "large":
        try:
            api.send(session, payload(options.messages + 1, options.size + 1), deadline.left())
            extra["too_large"] = "accepted"
        except imagent.Error as error:
            stream.error(error)
            extra["too_large"] = imagent.error_name(error)
    return stream.report(scenario, **extra)


# MARK: sessions (asyncio)


async def run_sessions(options: argparse.Namespace, deadline: Deadline) -> dict[str, Any]:
    errors: Counter[str] = Counter()
    opened = sent = received = wrong = 0
    message_one = payload(1, options.size)
    async with imagent.aio.connect(options.socket, "imagent-conformance-python") as client:
        async def one() -> None:
            nonlocal opened, sent, received, wrong
            try:
                session = await client.open(options.service, timeout=deadline.left())
                opened += 1
                await session.send(message_one, timeout=deadline.left())
                sent += 1
                message = await session.receive(deadline.left())
                if message is None:
                    return
                message.ack()
                if message.session == session.id and message.payload == message_one:
                    received += 1
                else:
                    wrong += 1
                extra = await session.receive(0.001)
                if extra is not None:
                    wrong += 1
            except imagent.Error as error:
                errors[imagent.error_name(error)] += 1

        await asyncio.gather(*(one() for _ in range(options.sessions)))
    return dict(scenario="sessions", opened=opened, sent=sent, received=received, wrong=wrong, errors=dict(errors))


# MARK: open, attach, bench (blocking)


def run_open(options: argparse.Namespace, deadline: Deadline) -> dict[str, Any]:
    with imagent.connect(options.socket, "imagent-conformance-python") as client:
        session = client.open(options.service, timeout=deadline.left())
        return dict(scenario="open", session=session.id)


def run_attach(options: argparse.Namespace, deadline: Deadline) -> dict[str, Any]:
    def outcome(step: Callable[[], object]) -> str:
        try:
            step()
            return "ok"
        except imagent.Error as error:
            return imagent.error_name(error)

    with imagent.connect(options.socket, "imagent-conformance-python") as client:
        attached: list[imagent.Session] = []
        attach = outcome(lambda: attached.append(client.attach(options.session, timeout=deadline.left())))
        data = payload(1, options.size)
        if attached:
            session = attached[0]
            send = outcome(lambda: session.send(data, timeout=deadline.left()))
            close = outcome(lambda: session.close(timeout=deadline.left()))
        else:
            send = outcome(lambda: client.send_to(options.session, data, timeout=deadline.left()))
            close = outcome(lambda: client.close_session(options.session, timeout=deadline.left()))
        return dict(scenario="attach", attach=attach, send=send, close=close)


def run_bench(options: argparse.Namespace, deadline: Deadline) -> dict[str, Any]:
    with imagent.connect(options.socket, "imagent-conformance-python") as client:
        sink = client.open("sink")
        payloads = [payload(number, options.size) for number in range(1, 101)]
        start = time.perf_counter()
        for number in range(options.messages):
            sink.send(payloads[number % 100])
        oneway = options.messages / (time.perf_counter() - start)
        echo = client.open("echo")
        rtts = []
        for number in range(max(options.messages // 10, 100)):
            sent = time.perf_counter()
            echo.send(payloads[number % 100])
            message = echo.receive(deadline.left())
            if message is None:
                raise imagent.TimedOut("no echo in time")
            message.ack()
            rtts.append((time.perf_counter() - sent) * 1e6)
        rtts.sort()
        sink.close()
        echo.close()
        return dict(scenario="bench", size=options.size, oneway_msgs_per_s=oneway,
                    rtt_p50_us=rtts[len(rtts) // 2], rtt_p99_us=rtts[min(len(rtts) - 1, len(rtts) * 99 // 100)])


def u64(text: str) -> int:
    value = int(text)
    if not 0 <= value < 1 << 64:
        raise argparse.ArgumentTypeError(f"{text} is not a session id (a u64)")
    return value


SCENARIOS = ("echo", "large", "queue-full", "server-down", "sessions", "stream", "open", "attach", "bench")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--socket", required=True)
    parser.add_argument("scenario", choices=SCENARIOS)
    parser.add_argument("--service", default="echo")
    parser.add_argument("--messages", type=int, default=100)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--sessions", type=int, default=1)
    parser.add_argument("--session", type=u64, default=0)
    parser.add_argument("--timeout-ms", type=int, default=120000)
    parser.add_argument("--aio", action="store_true", help="the stream scenarios on the asyncio API")
    options = parser.parse_args(argv)
    options.size = max(8, options.size)
    deadline = Deadline(options.timeout_ms)
    try:
        if options.scenario == "sessions":
            report = asyncio.run(run_sessions(options, deadline))
        elif options.scenario == "open":
            report = run_open(options, deadline)
        elif options.scenario == "attach":
            report = run_attach(options, deadline)
        elif options.scenario == "bench":
            report = run_bench(options, deadline)
        else:
            api: Blocking | Aio = Aio(options.socket) if options.aio else Blocking(options.socket)
            try:
                report = run_stream(api, options, deadline)
            finally:
                api.close()
    except imagent.Error as error:
        emit(scenario=options.scenario, error=f"{imagent.error_name(error)}: {error}")
        return 1
    emit(**report)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
