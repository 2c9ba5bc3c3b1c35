#if canImport(Glibc)
import Glibc
#endif
import IMAgentTestKit

/// The "imagentd over MQTT" row of `compare`: a second imagentd with
/// `[server] protocol = "mqtt"` whose upstream is the bridge's upstream
/// mosquitto, and a backend there serving the `echo` service and
/// acknowledging the `sink` service without answering: by default
/// `MQTTBenchBackend` (the bench answers, as for the direct MQTT client), or
/// the example backend (`examples/mqtt-echo/echo.py`, paho, two instances);
/// that one is run from a checkout (the script is found beside this source file).
final class MQTTUpstream {
    enum Backend: String, Sendable {
        case bench, python
    }

    static let clientID = "imagent-bench-mqtt"
    let daemon: DaemonProcess
    private var backends: [ChildProcess] = []
    private var benchBackend: MQTTBenchBackend?

    static let echoScript: String = {
        var parts = "\(#filePath)".split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        parts.removeLast(3)  // Sources/imagent-bench/MQTTUpstream.swift
        return parts.joined(separator: "/") + "/examples/mqtt-echo/echo.py"
    }()

    init(brokerPort: Int, token: String, durability: String, backend: Backend) async throws {
        guard backend == .bench || access(Self.echoScript, R_OK) == 0 else {
            throw BenchError("\(Self.echoScript) is missing (run from a checkout)")
        }
        daemon = try await DaemonProcess(serverAddress: "127.0.0.1:\(brokerPort)", token: token, durability: durability,
                                         maxSessions: 1_000, settings: "[mqtt]\nclient_id = \"\(Self.clientID)\"",
                                         server: "protocol = \"mqtt\"")
        temporaryDirectories.append(daemon.directory)
        if backend == .bench {
            do {
                // Subscribed before the first message: an up message nobody takes is sent again later.
                benchBackend = try await MQTTBenchBackend(port: brokerPort, clientID: "imagent-bench-backend",
                                                          filter: "imagent/\(Self.clientID)/+/+/up")
            } catch {
                await stop()
                throw error
            }
            return
        }
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
        await benchBackend?.stop()
        benchBackend = nil
        for backend in backends { await backend.stop() }
        backends.removeAll()
        await daemon.stop()
    }
}
