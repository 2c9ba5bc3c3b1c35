import Foundation
import IMAgentTestKit
import Testing

/// What keeps the packaged `imagentd`'s idle memory down (BENCHMARKS.md, "Footprint"), checked
/// on the binary itself, since an idle daemon's PSS is mostly its own mapped pages:
/// - no regex engine: `String.contains(String)` and its kin live in _StringProcessing, which
///   brings _RegexParser with it (about 1 MB of code that the daemon never runs);
/// - no exported symbols (a dynamic symbol table of 1.5 MB otherwise, and code that
///   --gc-sections must keep);
/// - read-only data in a segment apart from the code, and relative relocations packed (DT_RELR):
///   the linker flags Package.swift gives the release `imagentd`;
/// - the functions that run from the start through idle work (Sources/imagentd/imagentd.order)
///   laid out together at the start of the code, so that an idle daemon maps few code pages.
///
/// It reads `$IMAGENT_RELEASE_BIN_DIR/imagentd` (scripts/test sets it to the packaged build:
/// release, Swift runtime linked statically); a debug build is linked differently, so without
/// it the suite does not run.
@Suite(.enabled(if: releaseBinDirectory != nil, "IMAGENT_RELEASE_BIN_DIR is unset (scripts/test sets it)"),
       .timeLimit(.minutes(1)))
struct ReleaseFootprintTests {
    static var binary: String { (releaseBinDirectory ?? "") + "/imagentd" }

    @Test func theReleaseDaemonLinksNoRegexEngine() async throws {
        let symbols = try await run("nm", ["--defined-only", Self.binary])
        // Swift mangles a module's name as `<length><name>`, in its declarations and its extensions of others' types.
        let regex = symbols.split(separator: "\n").filter { $0.contains("17_StringProcessing") || $0.contains("12_RegexParser") }
        let hint = "find the caller with `nm -u` on the objects in .build/release/imagentd.product/Objects.LinkFileList"
        #expect(regex.isEmpty, "\(regex.count) symbols of _StringProcessing or _RegexParser, e.g. \(regex.prefix(5)); \(hint)")
        #expect(symbols.split(separator: "\n").count > 10_000, "nm listed too few symbols to judge: is \(Self.binary) stripped?")
    }

    @Test func theReleaseDaemonExportsNoSymbols_andKeepsDataApartFromCode() async throws {
        let exported = try await run("nm", ["-D", "--defined-only", Self.binary]).split(separator: "\n")
        #expect(exported.count < 100, "\(exported.count) exported symbols, e.g. \(exported.prefix(5))")
        let segments = try await run("readelf", ["-lW", Self.binary]).split(separator: "\n").filter { $0.contains("LOAD") }
        let readOnly = segments.filter { $0.hasSuffix(" R   0x1000") }
        #expect(!readOnly.isEmpty && segments.contains { $0.hasSuffix(" R E 0x1000") },
                "no read-only LOAD segment apart from the code's:\n\(segments.joined(separator: "\n"))")
        let packed = try await run("readelf", ["-dW", Self.binary]).contains("(RELR)")
        #expect(packed, "relative relocations are not packed (no DT_RELR)")
    }

    /// Most names in imagentd.order still exist (else scripts/order-file writes it again), and the
    /// functions they name come first in the code: without the order they spread over all of it.
    @Test func theFunctionsRunFromTheStartThroughIdleWork_comeFirstInTheCode() async throws {
        let order = Set(try String(contentsOfFile: Self.orderFile, encoding: .utf8).split(separator: "\n").map(String.init))
        try #require(order.count > 1_000, "\(Self.orderFile) lists \(order.count) functions")
        let code = try await run("readelf", ["-lW", Self.binary]).split(separator: "\n")
            .first { $0.contains("LOAD") && $0.hasSuffix(" R E 0x1000") }?.split(separator: " ")
        let start = try #require(code.flatMap { UInt64($0[2].dropFirst(2), radix: 16) })
        let size = try #require(code.flatMap { UInt64($0[5].dropFirst(2), radix: 16) })
        var offsets: [UInt64] = []
        var found = Set<String>()
        for line in try await run("nm", ["--defined-only", Self.binary]).split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count == 3, "tTwW".contains(fields[1]), order.contains(String(fields[2])),
                  let address = UInt64(fields[0], radix: 16), address >= start else { continue }
            offsets.append(address - start)
            found.insert(String(fields[2]))
        }
        let current = Double(found.count) / Double(order.count)
        #expect(current >= 0.75, "only \(found.count) of the \(order.count) functions in \(Self.orderFile) exist: run scripts/order-file")
        offsets.sort()
        let p95 = Double(offsets[offsets.count * 95 / 100]) / Double(size)
        #expect(p95 < 0.6, "95 % of the ordered functions lie within the first \(Int(p95 * 100)) % of the code, not together at its start")
    }

    private static var orderFile: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources/imagentd/imagentd.order").path
    }

    private func run(_ tool: String, _ arguments: [String]) async throws -> String {
        let output = try await ChildProcess.run("/usr/bin/" + tool, arguments, limit: .seconds(30))
        try #require(output.status == 0 && !output.signaled, "\(tool) \(arguments.joined(separator: " ")): \(output.stderr)")
        return output.stdout
    }
}

private let releaseBinDirectory: String? = ProcessInfo.processInfo.environment["IMAGENT_RELEASE_BIN_DIR"].flatMap { $0.isEmpty ? nil : $0 }
