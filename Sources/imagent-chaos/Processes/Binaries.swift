import Foundation

/// Where the programs come from: the build directory this executable sits in.
enum Binaries {
    static let directory: String = {
        let path = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return (path as NSString).deletingLastPathComponent
    }()

    static var chaos: String { directory + "/imagent-chaos" }
    static var daemon: String { directory + "/imagentd" }
    static var refserver: String { directory + "/imagent-refserver" }
    static var loadgen: String { directory + "/imagent-loadgen" }

    /// `ip`, to start programs inside a namespace with `ip netns exec` (which execs them: the pid stays theirs).
    static let ip: String = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    } ?? "/usr/sbin/ip"

    static func missing() -> [String] {
        [daemon, refserver, loadgen].filter { !FileManager.default.isExecutableFile(atPath: $0) }
    }
}
