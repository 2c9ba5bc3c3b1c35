#if canImport(Glibc)
import Glibc
#endif
import ConfigFile

/// What `--check-config` checks beyond the file's syntax and values: the
/// things the daemon needs from this machine at start — files it reads
/// (CA bundle, token file, client certificate and key), a store directory
/// it can create, groups that exist. Each problem is `file:line: message`,
/// on the line of the key (line 1 for a default the file does not set).
enum ConfigEnvironmentCheck {
    static func problems(_ configuration: DaemonConfiguration, text: String, file: String) -> [ConfigProblem] {
        let document = (try? TOMLParser.parse(text)) ?? TOMLTable()
        var problems: [ConfigProblem] = []
        func problem(_ line: Int, _ message: String) {
            problems.append(ConfigProblem(file: file, line: line, message: message))
        }
        func readable(_ path: String, key: String, line: Int) {
            guard !path.isEmpty, let trouble = unreadable(path) else { return }
            problem(line, "\(key): cannot read \(path): \(trouble)")
        }

        let tls = configuration.server.tls
        if tls.enabled {
            readable(tls.caFile, key: "server.tls.ca_file", line: document.line("server", "tls", "ca_file"))
            readable(tls.certificateFile, key: "server.tls.certificate_file", line: document.line("server", "tls", "certificate_file"))
            readable(tls.privateKeyFile, key: "server.tls.private_key_file", line: document.line("server", "tls", "private_key_file"))
        }
        if case .file(let path) = configuration.token {
            readable(path, key: "auth.token_file", line: document.line("auth", "token_file"))
        }
        if let trouble = notCreatable(configuration.store.directory) {
            problem(document.line("store", "directory"), "store.directory: \(configuration.store.directory) \(trouble)")
        }
        for (key, name) in [("group", configuration.ipc.group), ("admin_group", configuration.ipc.adminGroup)]
        where !name.isEmpty && AdminPolicy.groupID(named: name) == nil {
            // The default admin group is created by the package; without it only root is admin, which is no error.
            let explicit: Bool
            if case .table(let ipc)? = document["ipc"]?.value { explicit = ipc[key] != nil } else { explicit = false }
            if key == "admin_group" && !explicit { continue }
            problem(document.line("ipc", key), "ipc.\(key): no group named \"\(name)\" on this system (see getent group)")
        }
        return problems
    }

    /// Why `path` cannot be opened for reading, or nil.
    static func unreadable(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return String(cString: strerror(errno)) }
        close(fd)
        return nil
    }

    /// Why the directory neither exists nor can be made (its nearest existing
    /// ancestor must be a writable directory), or nil.
    static func notCreatable(_ directory: String) -> String? {
        var status = stat()
        if stat(directory, &status) == 0 {
            return (status.st_mode & S_IFMT) == S_IFDIR ? nil : "exists and is not a directory"
        }
        var ancestor = directory
        while let slash = ancestor.lastIndex(of: "/") {
            ancestor = slash == ancestor.startIndex ? "/" : String(ancestor[..<slash])
            if stat(ancestor, &status) == 0 {
                guard (status.st_mode & S_IFMT) == S_IFDIR else { return "cannot be created: \(ancestor) is not a directory" }
                guard access(ancestor, W_OK | X_OK) == 0 else {
                    return "does not exist and cannot be created in \(ancestor): \(String(cString: strerror(errno)))"
                }
                return nil
            }
            if ancestor == "/" { break }
        }
        return "does not exist and cannot be created"
    }
}
