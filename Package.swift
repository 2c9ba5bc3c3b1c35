// swift-tools-version:6.0
import PackageDescription

// The daemon and the CLI stay off full Foundation: nothing here may import it.

// The release `imagentd`'s own modules put each function in a section of its own, so that the
// linker can lay out the functions Sources/imagentd/imagentd.order lists (those a daemon runs
// from its start through idle work, written by scripts/order-file) together at the start of
// its code. An idle daemon then maps those pages and few others: the kernel maps a file's pages
// by whole folios around each one touched, so scattered functions keep most of the code resident.
let daemonCodeLayout: [SwiftSetting] = [
    .unsafeFlags(["-Xfrontend", "-function-sections"], .when(platforms: [.linux], configuration: .release)),
]

let package = Package(
    name: "imagent",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "imagentd", targets: ["imagentd"]),
        .executable(name: "imagent", targets: ["imagent-cli"]),
        .executable(name: "imagent-refserver", targets: ["imagent-refserver"]),
        .executable(name: "imagent-bench", targets: ["imagent-bench"]),
        .executable(name: "imagent-loadgen", targets: ["imagent-loadgen"]),
        .executable(name: "imagent-chaos", targets: ["imagent-chaos"]),
        .executable(name: "imagent-example", targets: ["imagent-example"]),
        .executable(name: "fuzz-imlink", targets: ["fuzz-imlink"]),
        .executable(name: "fuzz-ipc", targets: ["fuzz-ipc"]),
        .executable(name: "fuzz-mqtt5", targets: ["fuzz-mqtt5"]),
        .executable(name: "fuzz-toml", targets: ["fuzz-toml"]),
        .executable(name: "fuzz-mqtt-session", targets: ["fuzz-mqtt-session"]),
        .executable(name: "fuzz-ipc-client", targets: ["fuzz-ipc-client"]),
        .library(name: "IMLink", targets: ["IMLink"]),
        .library(name: "AgentIPC", targets: ["AgentIPC"]),
        .library(name: "AgentStore", targets: ["AgentStore"]),
        .library(name: "MQTT5", targets: ["MQTT5"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        // The Prometheus registry and text format (on swift-metrics' CoreMetrics; no Foundation).
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
    ],
    targets: [
        // C helpers and system libraries.
        .target(name: "CCRC32C"),
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        // glibc's malloc_trim, which the Glibc module does not export (MemoryTrimmer).
        .systemLibrary(name: "CMalloc"),
        // Swift concurrency's global enqueue hook, which imagentd points at its event loop.
        .target(name: "CConcurrencyHook"),

        // Child processes without Foundation's Process, dying with their parent: the suite's, and
        // imagent-refserver beside `imagentd --dev`.
        .target(name: "CChildProcess"),
        // What tests and test tools share: child processes, the handles
        // of imagentd, imagent-refserver and imagent-loadgen, a seeded random generator, temporary
        // directories, ports, Unix socket addresses, the delay proxy, sd_notify and network-namespace
        // fixtures. Never linked into imagentd or imagent.
        .target(
            name: "IMAgentTestKit",
            dependencies: [
                "CChildProcess",
                // The delay proxy.
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),

        // The configuration file format (a strict TOML subset with line numbers).
        .target(name: "ConfigFile"),

        // Codecs: pure values, no I/O.
        .target(
            name: "IMLink",
            dependencies: ["CCRC32C", "CZlib", .product(name: "NIOCore", package: "swift-nio")], swiftSettings: daemonCodeLayout
        ),
        // The MQTT 5.0 packet codec for the MQTT upstream (issue 14).
        .target(name: "MQTT5", dependencies: [.product(name: "NIOCore", package: "swift-nio")], swiftSettings: daemonCodeLayout),
        .target(
            name: "AgentIPC",
            dependencies: [
                "IMLink",
                .product(name: "NIOCore", package: "swift-nio"),
                // The Swift client (Client/) connects through NIOPosix; the codec itself does no I/O.
                .product(name: "NIOPosix", package: "swift-nio"),
            ], swiftSettings: daemonCodeLayout
        ),

        // JSON text for IPC results and admin replies, written without Foundation.
        .target(name: "JSONText", swiftSettings: daemonCodeLayout),

        // A thin, safe Swift wrapper over SQLite's C API, shared by the reference server and the daemon's store.
        .target(name: "SQLiteDatabase", dependencies: ["CSQLite"], swiftSettings: daemonCodeLayout),

        // The daemon's durable store: sessions, outbox, inbox, metadata; group commit on one writer thread.
        .target(
            name: "AgentStore",
            dependencies: [
                "SQLiteDatabase",
                "CCRC32C",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ], swiftSettings: daemonCodeLayout
        ),
        // A child process for AgentStoreTests' crash test: appends until it is killed, printing each committed seq.
        .executableTarget(
            name: "agentstore-crash-writer",
            dependencies: ["AgentStore", .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio")]
        ),

        // The reference IMLink server: a library so tests and imagent-bench embed it (imagentd does not).
        .target(
            name: "RefServer",
            dependencies: [
                "IMLink", "SQLiteDatabase", "JSONText",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "imagent-refserver",
            dependencies: [
                "RefServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // The daemon itself: pure cores (link state machine, policies, session router) and the I/O shell
        // that performs their actions. A library, so tests import it rather than an executable.
        .target(
            name: "IMAgentCore",
            dependencies: [
                // Not RefServer: `imagentd --dev` runs imagent-refserver as a child process (CChildProcess).
                "IMLink", "MQTT5", "AgentIPC", "AgentStore", "ConfigFile", "JSONText", "CSystemd", "CMalloc", "CChildProcess",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                // No swift-argument-parser: it links FoundationEssentials (see DaemonArguments).
            ], swiftSettings: daemonCodeLayout
        ),
        // `imagentd`: `main` and the command line; everything else is IMAgentCore.
        .executableTarget(
            name: "imagentd",
            dependencies: [
                "IMAgentCore", "CConcurrencyHook",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            exclude: ["imagentd.order"],
            swiftSettings: daemonCodeLayout,
            // An idle daemon's memory is mostly its own mapped pages (BENCHMARKS.md, "Footprint"). lld keeps
            // read-only data in a segment apart from code, so it is mapped only where read; no symbols are
            // exported (nothing loads the daemon as a library), so the dynamic symbol table stays small and
            // --gc-sections drops more; relative relocations are packed (DT_RELR, glibc 2.36); the functions
            // imagentd.order lists come first (`daemonCodeLayout`; names it lists that no longer exist are
            // skipped). Linker only: the code itself is the same. ReleaseFootprintTests checks the result.
            linkerSettings: [
                .unsafeFlags(["-use-ld=lld", "-Xlinker", "--no-export-dynamic", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs",
                              "-Xlinker", "--symbol-ordering-file=\(Context.packageDirectory)/Sources/imagentd/imagentd.order",
                              "-Xlinker", "--no-warn-symbol-ordering"],
                             .when(platforms: [.linux], configuration: .release)),
            ]
        ),
        .executableTarget(
            name: "imagent-cli",
            dependencies: [
                "AgentIPC", "JSONText",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),

        // The documented example program for the Swift client (examples/swift-echo/README.md).
        .executableTarget(
            name: "imagent-example",
            dependencies: ["AgentIPC", .product(name: "NIOCore", package: "swift-nio")],
            path: "examples/swift-echo",
            exclude: ["README.md"]
        ),

        // Measurements and fuzzers.
        .executableTarget(
            name: "imagent-bench",
            dependencies: [
                "IMAgentTestKit",
                "IMLink", "AgentIPC", "AgentStore", "RefServer", "MQTT5",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Acceptance load: N sessions per process through the daemon, every message checked exactly once, in order.
        .executableTarget(
            name: "imagent-loadgen",
            dependencies: [
                "IMAgentTestKit",
                "AgentIPC",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // The Swift client's driver for the client conformance suite (clients/conformance/README.md):
        // one scenario on IPCClient alone, reported as JSON lines.
        .executableTarget(
            name: "imagent-conformance",
            dependencies: ["AgentIPC", "JSONText", .product(name: "NIOCore", package: "swift-nio")]
        ),
        // The chaos suite: imagentd and imagent-refserver in network namespaces under loss, partitions,
        // flaps, a thin pipe, delay and jitter, kills and restarts, while imagent-loadgen streams and checks.
        // A test tool, not the daemon: Foundation is allowed here.
        .executableTarget(
            name: "imagent-chaos",
            dependencies: [
                "IMAgentTestKit",
                "AgentIPC",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .target(name: "FuzzReplay", path: "fuzz/replay"),
        .executableTarget(
            name: "fuzz-imlink",
            dependencies: ["IMLink", "FuzzReplay", .product(name: "NIOCore", package: "swift-nio")],
            path: "fuzz/imlink"
        ),
        .executableTarget(
            name: "fuzz-ipc",
            dependencies: ["AgentIPC", "FuzzReplay", .product(name: "NIOCore", package: "swift-nio")],
            path: "fuzz/ipc"
        ),
        .executableTarget(
            name: "fuzz-mqtt5",
            dependencies: ["MQTT5", "FuzzReplay", .product(name: "NIOCore", package: "swift-nio")],
            path: "fuzz/mqtt5"
        ),
        // The next three reach internal types (`@testable import`): scripts/fuzz builds them with
        // -enable-testing, as a debug build is.
        .executableTarget(
            name: "fuzz-toml",
            dependencies: ["ConfigFile", "IMAgentCore", "FuzzReplay"],
            path: "fuzz/toml"
        ),
        .executableTarget(
            name: "fuzz-mqtt-session",
            dependencies: ["IMAgentCore", "IMLink", "MQTT5", "FuzzReplay", .product(name: "NIOCore", package: "swift-nio")],
            path: "fuzz/mqtt-session"
        ),
        .executableTarget(
            name: "fuzz-ipc-client",
            dependencies: [
                "AgentIPC", "FuzzReplay",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            path: "fuzz/ipc-client"
        ),

        .testTarget(
            name: "IMLinkTests",
            dependencies: ["IMLink", .product(name: "NIOTestUtils", package: "swift-nio")]
        ),
        // Vectors and the paho-mqtt cross-check script are read at test time, not bundled;
        // MosquittoInteropTests runs Debian's mosquitto (scripts/bootstrap installs it).
        .testTarget(
            name: "MQTT5Tests",
            dependencies: [
                "IMAgentTestKit",
                "MQTT5",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOTestUtils", package: "swift-nio"),
            ],
            exclude: ["vectors", "paho"]
        ),
        .testTarget(
            name: "AgentIPCTests",
            dependencies: [
                "AgentIPC",
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOTestUtils", package: "swift-nio"),
            ]
        ),
        .testTarget(name: "ConfigFileTests", dependencies: ["ConfigFile"]),
        // Runs the imagent-bench binary (depending on it makes `swift test` build it).
        .testTarget(name: "imagentBenchTests", dependencies: ["IMAgentTestKit", "imagent-bench"]),
        // Depending on agentstore-crash-writer makes `swift test` build the child the crash test kills.
        .testTarget(
            name: "AgentStoreTests",
            dependencies: [
                "IMAgentTestKit",
                "AgentStore", "SQLiteDatabase", "agentstore-crash-writer",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "RefServerTests",
            dependencies: [
                "IMAgentTestKit",
                "RefServer", "IMLink", "SQLiteDatabase", "JSONText",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "imagentdTests",
            dependencies: [
                "IMAgentTestKit",
                "IMAgentCore", "imagentd", "IMLink", "MQTT5", "RefServer",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The Swift client and the `imagent` binary against a fake daemon (a test double of the
        // IPC peer); depending on imagent-cli makes `swift test` build the binary the tests run.
        .testTarget(
            name: "imagentCLITests",
            dependencies: [
                "IMAgentTestKit",
                "AgentIPC", "imagent-cli", "imagentd", "RefServer", "imagent-refserver", "imagent-loadgen",
                "imagent-conformance",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
    ]
)
