import AgentIPC

/// `open`: a new session, left open for another process.
func runOpen(_ options: Options) async throws {
    let client = try await IPCClient.connect(socketPath: options.socket, clientName: "imagent-conformance")
    let opened = try await client.open(service: options.service)
    await client.close()
    Output.line { json in
        json.field("scenario", "open")
        json.field("session", opened.session)
    }
}

/// `attach`: attach `--session`, send on it, close it; each step's outcome, "ok" or the error's name.
func runAttach(_ options: Options) async throws {
    let client = try await IPCClient.connect(socketPath: options.socket, clientName: "imagent-conformance")
    func outcome(_ step: () async throws -> Void) async -> String {
        do {
            try await step()
            return "ok"
        } catch {
            return errorName(error)
        }
    }
    let session = options.session
    let attach = await outcome { _ = try await client.attach(session: session) }
    let send = await outcome { try await client.send(session: session, payload: Payload.make(1, size: options.size)) }
    let close = await outcome { try await client.close(session: session) }
    await client.close()
    Output.line { json in
        json.field("scenario", "attach")
        json.field("attach", attach)
        json.field("send", send)
        json.field("close", close)
    }
}

/// `bench` (for `scripts/bench clients`): one-way sends to `sink` as fast as a blocking send
/// allows, then sequential round trips on `echo`.
func runBench(_ options: Options) async throws {
    let client = try await IPCClient.connect(socketPath: options.socket, clientName: "imagent-conformance")
    let clock = ContinuousClock()
    let sink = try await client.open(service: "sink").session
    let start = clock.now
    for number in 1...UInt64(options.messages) {
        try await client.send(session: sink, payload: Payload.make(number, size: options.size))
    }
    let oneway = Double(options.messages) / seconds(clock.now - start)

    let echo = try await client.open(service: "echo").session
    var events = client.events.makeAsyncIterator()
    var rtts: [Double] = []
    for number in 1...UInt64(max(options.messages / 10, 100)) {
        let sent = clock.now
        try await client.send(session: echo, payload: Payload.make(number, size: options.size))
        while let event = try await events.next() {
            guard case .message(let message) = event, message.session == echo else { continue }
            try await client.ack(session: echo, seq: message.seq)
            break
        }
        rtts.append(seconds(clock.now - sent) * 1e6)
    }
    rtts.sort()
    try await client.close(session: sink)
    try await client.close(session: echo)
    await client.close()
    Output.line { json in
        json.field("scenario", "bench")
        json.field("size", options.size)
        json.field("oneway_msgs_per_s", oneway)
        json.field("rtt_p50_us", rtts[rtts.count / 2])
        json.field("rtt_p99_us", rtts[min(rtts.count - 1, rtts.count * 99 / 100)])
    }
}

private func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}
