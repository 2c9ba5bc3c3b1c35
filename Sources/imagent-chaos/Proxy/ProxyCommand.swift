import ArgumentParser
import Foundation
import IMAgentTestKit
import NIOCore
import NIOPosix

/// `imagent-chaos proxy`: a TCP proxy that delays every chunk by a random time
/// in a range (delay and jitter without netem), keeping byte order.
struct ProxyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "proxy",
        abstract: "Forward TCP, holding each chunk for a random delay in a range, never overtaking the chunk before it.",
        discussion: """
            Prints "listening on HOST:PORT" first (port 0 picks a free one), then forwards every accepted \
            connection to --to. Each chunk read in either direction waits a delay drawn uniformly from \
            --delay-ms before it is written on; a chunk never leaves before the chunk ahead of it in the same \
            direction, so the byte stream is intact and only its timing changes. Runs until killed.
            """)

    @Option(help: ArgumentHelp("Address to listen on.", valueName: "host:port"))
    var listen = "127.0.0.1:0"

    @Option(help: ArgumentHelp("Address every connection is forwarded to.", valueName: "host:port"))
    var to: String

    @Option(name: .customLong("delay-ms"), help: ArgumentHelp("One-way delay per chunk, MIN-MAX or one value, in ms.",
                                                              valueName: "min-max"))
    var delayMS = "0"

    @Option(help: "Seed of the delays drawn.")
    var seed: UInt64 = 1

    func validate() throws {
        guard DelayRange(parsing: delayMS) != nil else { throw ValidationError("--delay-ms takes MIN-MAX or MS, like 200-800") }
        guard HostPort(listen) != nil, HostPort(to) != nil else { throw ValidationError("addresses are host:port") }
    }

    func run() async throws {
        let (listenAddress, target) = (HostPort(listen)!, HostPort(to)!)
        let address = try SocketAddress.makeAddressResolvingHost(target.host, port: target.port)
        let proxy = try await DelayProxy.start(listenHost: listenAddress.host, port: listenAddress.port, target: address,
                                               delays: DelayRange(parsing: delayMS)!, seed: seed)
        print("listening on \(listenAddress.host):\(proxy.port)")
        fflush(nil)
        try await proxy.closeFuture.get()
    }
}

/// "host:port", the host possibly an IPv6 literal in brackets.
struct HostPort {
    var host: String
    var port: Int

    init?(_ text: String) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
              (0...65535).contains(port) else { return nil }
        host = String(text[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        self.port = port
    }
}
