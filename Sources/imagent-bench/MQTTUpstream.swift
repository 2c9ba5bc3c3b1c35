#if canImport(Glibc)
import Glibc
#endif
import IMAgentTestKit

/// The "imagentd over MQTT" row of `compare`: a second imagentd with
/// `[server] protocol = "mqtt"` whose upstream is the bridge's upstream
/// mosquitto, and the example backend (`examples/mqtt-echo/echo.py`, paho)
/// serving the `echo` service there and a second instance acknowledging the
/// `sink` service without answering. Run from a checkout (the script is
/// found beside this source file).
final class MQTTUpstream {
    let daemon: DaemonProcess
    private var backends: [ChildProcess] = []

    static let echoScript: String = {
        var parts = "\(#filePath)".split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        parts.removeLast(3)  // Sources/imagent-bench/MQTTUpstream.swift
        return parts.joined(separator: "/") + "/examples/mqtt-echo/echo.py"
    }()

    init(brokerPort: Int, token: String, durability: String) async throws {
        guard access(Self.echoScript, R_OK) == 0 else { throw BenchError("\(Self.echoScript) is missing (run from a checkout)") }
        daemon = try await DaemonProcess(serverAddress: "127.0.0.1:\(brokerPort)", token: token, durability: durability,
                                         maxSessions: 1_000, settings: "[mqtt]\nclient_id = \"imagent-bench-mqtt\"",
                                         server: "protocol = \"mqtt\"")
        temporaryDirectories.append(daemon.directory)
        do {
            for (service, extra) in [("echo", [String]()), ("sink", ["--sink"])] {
                let log = daemon.directory + "/\(service).log"
                backends.append(try ChildProcess(executable: "/usr/bin/env",
                                                 arguments: ["python3", Self.echoScript, "--port", "\(brokerPort)", "--service", service,
                                                             "--group", "bench-\(service)", "--client-id", "bench-\(service)-\(getpid())"] + extra,
                                                 stdout: .file(log), stderr: .file(log)))
            }
            // Both subscribed before the first message: an up message nobody takes is sent again later.
            for service in ["echo", "sink"] {
                var subscribed = false
                for _ in 0..<200 where !subscribed {
                    subscribed = readFile(daemon.directory + "/\(service).log")?.contains("subscribed") ?? false
                    if !subscribed { try await Task.sleep(for: .milliseconds(25)) }
                }
                guard subscribed else {
                    throw BenchError("the \(service) backend did not subscribe: \(readFile(daemon.directory + "/\(service).log") ?? "")")
                }
            }
        } catch {
            await stop()
            throw error
        }
    }

    var pids: [pid_t] { [daemon.pid] }

    func stop() async {
        for backend in backends { await backend.stop() }
        backends.removeAll()
        await daemon.stop()
    }
}
