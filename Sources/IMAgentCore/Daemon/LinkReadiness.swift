#if canImport(Glibc)
import Glibc
#endif

/// Whether a configuration has what a link needs: endpoints and a token that
/// can be read. Without them the daemon runs unconfigured — it serves its
/// socket and says what is missing — instead of failing (and restarting in a
/// loop under systemd).
enum LinkReadiness {
    /// What is missing and what to do, or nil when a link can run.
    /// `environment` looks up CREDENTIALS_DIRECTORY; `readable` tells whether
    /// a file can be opened and holds more than blanks.
    static func problem(_ configuration: DaemonConfiguration, configPath: String,
                        environment: (String) -> String? = { getenv($0).map { String(cString: $0) } },
                        readable: (String) -> FileCheck = fileCheck) -> String? {
        var missing: [String] = []
        if configuration.server.endpoints.isEmpty {
            missing.append("no endpoints: set [server] endpoints = [\"host:port\"] in \(configPath)")
        }
        switch configuration.linkToken {
        case .file(let path):
            if let trouble = readable(path).trouble {
                missing.append("no usable token: \(path) \(trouble); write the token there ([auth] token_file)")
            }
        case .credential(let name):
            guard let directory = environment("CREDENTIALS_DIRECTORY"), !directory.isEmpty else {
                missing.append("no usable token: the credential \(name) was not passed (CREDENTIALS_DIRECTORY is not set); "
                    + "set [auth] token_file, or run under the packaged unit with /etc/imagent/token")
                break
            }
            if let trouble = readable(directory + "/" + name).trouble {
                missing.append("no usable token: the credential \(name) \(trouble); write the token to /etc/imagent/token "
                    + "and restart the service (systemd passes credentials at start), or set [auth] token_file")
            }
        case .absent:
            break
        case .command:
            // A command's output is known only when it runs; its failures show as the link's last error.
            break
        }
        return missing.isEmpty ? nil : missing.joined(separator: "; ")
    }

    enum FileCheck: Equatable {
        case ok
        case missing(String)
        case empty

        var trouble: String? {
            switch self {
            case .ok: nil
            case .missing(let reason): "cannot be read (\(reason))"
            case .empty: "is empty"
            }
        }
    }

    /// Opens and reads `path` (a token is small): missing, unreadable, blank or fine.
    static func fileCheck(_ path: String) -> FileCheck {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return .missing(String(cString: strerror(errno))) }
        defer { close(fd) }
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                return .missing(String(cString: strerror(errno)))
            }
            if count == 0 { return .empty }
            if chunk[0..<count].contains(where: { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }) { return .ok }
        }
    }
}
