#if canImport(Glibc)
import Glibc
#endif

/// `imagentd --dev`: no configuration file, the reference server on loopback
/// beside the daemon (`DevelopmentServer`), and state, token, socket and the
/// server's log in one local folder.
struct DevelopmentMode {
    let directory: String
    let server: DevelopmentServer
    let configuration: DaemonConfiguration

    static func start(directory relative: String) throws -> DevelopmentMode {
        let directory = absolute(relative)
        for path in [directory, directory + "/state"] where mkdir(path, 0o700) != 0 && errno != EEXIST {
            throw DevelopmentModeError("cannot create \(path): \(String(cString: strerror(errno)))")
        }
        let tokenFile = directory + "/token"
        // A fixed development token: the folder is private (0700) and the server listens on loopback only.
        try write("dev-token\n", to: tokenFile)
        let server = try DevelopmentServer.start(tokenFile: tokenFile, statePath: directory + "/refserver.sqlite3",
                                                 logPath: directory + "/refserver.log")
        var configuration = DaemonConfiguration()
        configuration.server.endpoints = [server.address]
        configuration.server.tls.enabled = false  // the loopback reference server has no certificate
        configuration.server.agentID = "imagentd-dev"
        configuration.token = .file(tokenFile)
        configuration.ipc.socket = directory + "/imagent.sock"
        configuration.ipc.mode = 0o600
        configuration.store.directory = directory + "/state"
        configuration.store.durability = .process
        configuration.watchNetwork = false
        return DevelopmentMode(directory: directory, server: server, configuration: configuration)
    }

    private static func absolute(_ path: String) -> String {
        if path.hasPrefix("/") { return path }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX))
        guard getcwd(&buffer, buffer.count) != nil else { return path }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) + "/" + path
    }

    private static func write(_ text: String, to path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw DevelopmentModeError("cannot write \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let written = text.utf8CString.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count - 1) }
        guard written == text.utf8.count else { throw DevelopmentModeError("cannot write \(path): short write") }
    }
}

struct DevelopmentModeError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
