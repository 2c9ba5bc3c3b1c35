// imagent-example: a complete local program on the AgentIPC Swift client.
//
// It opens a session on the reference server's `echo` service, sends each
// command-line argument as one message, prints every echo it receives,
// acknowledges it, and closes the session once all echoes are back.
// See README.md beside this file.

import AgentIPC
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

let words = Array(CommandLine.arguments.dropFirst())
guard !words.isEmpty else {
    print("usage: imagent-example WORD...   (socket: $IMAGENT_SOCKET, else the system or user default)")
    exit(1)
}

do {
    // Finds the socket as IPCSocketPath documents, says HELLO, checks WELCOME.
    let client = try await IPCClient.connect(clientName: "imagent-example")
    print("connected to imagentd \(client.welcome.daemonVersion), link \(client.welcome.linkState)")

    // A new session; it also works while the link is down (state pending):
    // the daemon stores what we send and forwards it once the link is up.
    let session = try await client.open(service: "echo", priority: .normal, durable: true)
    print("session \(session.session) is \(session.sessionState)")

    // ACCEPTED means durably stored: from here on the daemon owns delivery.
    for word in words {
        let seq = try await client.send(session: session.session, text: word, ttl: .seconds(60))
        print("sent #\(seq): \(word)")
    }

    // Echoes come back as MESSAGE events. Acknowledge each once handled, so
    // that a restart of this program does not see it again.
    var echoed = 0
    for try await event in client.events {
        switch event {
        case .message(let message) where message.session == session.session:
            print("echo #\(message.seq): \(String(buffer: message.payload))")
            try await client.ack(session: message.session, seq: message.seq)
            echoed += 1
        case .expired(let expired):
            print("message #\(expired.seq) was given up: \(expired.code)")
            echoed += 1
        case .sessionState(let change) where change.session == session.session:
            print("session is now \(change.state)")
        default:
            continue
        }
        if echoed == words.count { break }
    }

    try await client.close(session: session.session)
    await client.close()
} catch {
    // IPCClientError descriptions say what to do ("start it with systemctl…").
    print("imagent-example: \(error)")
    exit(2)
}
