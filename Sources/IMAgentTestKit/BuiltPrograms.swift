#if canImport(Glibc)
import Glibc
#endif

/// Where the suite's programs are: the build products directory, which holds
/// this executable (a test bundle on Linux, or one of the test tools) and
/// `imagentd`, `imagent`, `imagent-refserver`, `imagent-loadgen` beside it.
public enum BuiltPrograms {
    public static let directory: String = {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        let executable = length > 0 ? String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
                                    : CommandLine.arguments[0]
        func parent(_ path: String) -> String { path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "." }
        // On Darwin a test executable sits deeper, inside its bundle: walk up to the products.
        var candidate = parent(executable)
        while access(candidate + "/imagentd", X_OK) != 0, candidate.contains("/"), !candidate.isEmpty {
            candidate = parent(candidate)
        }
        return access(candidate + "/imagentd", X_OK) == 0 ? candidate : parent(executable)
    }()

    public static func path(_ program: String) -> String { directory + "/" + program }

    public static var daemon: String { path("imagentd") }
    public static var refserver: String { path("imagent-refserver") }
    public static var loadgen: String { path("imagent-loadgen") }
    public static var cli: String { path("imagent") }

    /// `ip`, to start a program inside a network namespace with `ip netns exec` (which execs it: the pid stays its own).
    public static let ip: String = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"].first { access($0, X_OK) == 0 } ?? "/usr/sbin/ip"

    /// The programs of `names` that are not built.
    public static func missing(_ names: [String] = ["imagentd", "imagent-refserver", "imagent-loadgen"]) -> [String] {
        names.map(path).filter { access($0, X_OK) != 0 }
    }
}
