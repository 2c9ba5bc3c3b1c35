import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// ejabberd 23.01's `mod_mqtt` (Debian's `ejabberd` package, installed by scripts/bootstrap) as
/// a private broker: its own Erlang VM listening on one address, with its configuration, spool
/// and log in a folder, no Erlang distribution (no node name, no epmd) and no system service.
/// Logins go through ejabberd's external authentication to a script that reads the host's
/// password from `passwordFile` at every login (so writing the file rotates it); the user
/// `backend` logs in with any password. The tests and the chaos suite start it from here.
public struct EjabberdNode: Sendable {
    /// ejabberd's Erlang applications, as Debian installs them.
    public static let libraries = "/usr/lib/x86_64-linux-gnu"
    public static let erl = "/usr/bin/erl"

    /// Why ejabberd cannot run here, nil when it can.
    public static let missing: String? = {
        guard access(erl, X_OK) == 0,
              let entries = try? FileManager.default.contentsOfDirectory(atPath: libraries),
              entries.contains(where: { $0.hasPrefix("ejabberd-") }) else {
            return "ejabberd is not installed (Debian's ejabberd package; scripts/bootstrap installs it)"
        }
        return nil
    }()

    public let directory: String
    public var passwordFile: String { directory + "/ejabberd.password" }
    public var logPath: String { directory + "/ejabberd.log" }
    /// The VM's own output (start-up failures land here, not in the log).
    public var outPath: String { directory + "/ejabberd.out" }

    /// Writes the configuration, the authentication script and `password` for `user`, listening on `ip:port`;
    /// `sessionExpiry` nil leaves mod_mqtt's default (300 s).
    public init(directory: String, ip: String, port: Int, user: String, password: String, sessionExpiry: Int? = nil) throws {
        if let missing = Self.missing { throw ChildProcessError(missing) }
        self.directory = directory
        try FileManager.default.createDirectory(atPath: directory + "/ejabberd-spool", withIntermediateDirectories: true)
        try password.write(toFile: passwordFile, atomically: true, encoding: .utf8)
        let script = directory + "/ejabberd-auth.py"
        // ejabberd's external authentication protocol: 2-byte big-endian length, "auth:User:Server:Password";
        // the answer is 2-byte length 2, then 1 (yes) or 0 (no).
        try """
            #!/usr/bin/env python3
            import struct, sys
            while True:
                head = sys.stdin.buffer.read(2)
                if len(head) < 2:
                    break
                request = sys.stdin.buffer.read(struct.unpack('>H', head)[0]).decode().split(':', 3)
                ok = 0
                if request[0] == 'auth' and len(request) == 4:
                    try:
                        expected = open('\(passwordFile)').read().strip()
                    except OSError:
                        expected = None
                    ok = int(request[1] == 'backend' or (request[1] == '\(user)' and request[3] == expected))
                elif request[0] == 'isuser':
                    ok = 1
                sys.stdout.buffer.write(struct.pack('>HH', 2, ok))
                sys.stdout.buffer.flush()
            """.write(toFile: script, atomically: true, encoding: .utf8)
        chmod(script, 0o700)
        try """
            hosts: [localhost]
            loglevel: info
            auth_method: external
            extauth_program: "\(script)"
            auth_use_cache: false
            listen:
              - port: \(port)
                ip: "\(ip)"
                module: mod_mqtt
            modules:
              mod_mqtt:\(sessionExpiry.map { "\n    session_expiry: \($0)" } ?? " {}")
            """.write(toFile: directory + "/ejabberd.yml", atomically: true, encoding: .utf8)
    }

    /// What starts the VM: `spawner.spawn(name, executable, arguments, outPath, outPath, setting)`; it stops gracefully on SIGTERM.
    public var executable: String { Self.erl }
    public var arguments: [String] {
        ["-noinput", "-noshell", "+K", "true", "-mnesia", "dir", "\"\(directory)/ejabberd-spool\"", "-s", "ejabberd"]
    }
    public var setting: [String: String] {
        ["ERL_LIBS": Self.libraries, "EJABBERD_CONFIG_PATH": directory + "/ejabberd.yml", "EJABBERD_LOG_PATH": logPath,
         "HOME": directory, "ERL_CRASH_DUMP": directory + "/erl_crash.dump"]
    }

    /// `examples/mqtt-echo/echo.py` for a broker without shared subscriptions (ejabberd): the
    /// same backend with a plain subscription to the `up` topics.
    public static func plainSubscriptionEcho(_ example: String) throws -> String {
        let shared = "f\"$share/{args.group}/{args.prefix}/+/{args.service}/+/up\""
        guard example.contains(shared) else { throw ChildProcessError("echo.py's up filter is no longer \(shared)") }
        return example.replacingOccurrences(of: shared, with: "f\"{args.prefix}/+/{args.service}/+/up\"")
    }
}
