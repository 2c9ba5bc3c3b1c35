// Two builds of one target:
//
// - `swift build` links this file's `@main`, which replays the files named on
//   the command line through `fuzz`, so the target always builds and a crash
//   the fuzzer found can be replayed (and debugged) without the sanitizers.
// - The fuzzing build leaves it out, because libFuzzer brings its own `main`,
//   which calls `LLVMFuzzerTestOneInput`, and a second entry point would clash:
//
//     swift build --product fuzz-ipc -c debug --sanitize=fuzzer --sanitize=address \
//         -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING --scratch-path .build-fuzz
//     SWIFT_BACKTRACE=enable=no .build-fuzz/debug/fuzz-ipc -max_total_time=60 CORPUS_DIR
//
//   Why `-Xswiftc -sanitize=fuzzer,address` on top of the two `--sanitize`:
//   SwiftPM hands them to swiftc as two flags, `-sanitize=fuzzer -sanitize=address`,
//   and swiftc (6.3) keeps only the last one. Without the combined flag, which
//   comes after them, the Swift modules get AddressSanitizer but no coverage
//   counters: libFuzzer still links and runs, but sees only the C targets'
//   edges and fuzzes blind ("no interesting inputs were found").
#if !FUZZING
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@main
struct ReplayInputs {
    static func main() {
        let paths = CommandLine.arguments.dropFirst()
        guard !paths.isEmpty else {
            print("usage: fuzz-ipc FILE…  (replays inputs; build with -DFUZZING and --sanitize=fuzzer to fuzz)")
            exit(2)
        }
        for path in paths {
            guard let bytes = readFile(path) else {
                print("\(path): cannot read")
                exit(1)
            }
            _ = bytes.withUnsafeBytes { fuzz($0.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, $0.count) }
            print("\(path): \(bytes.count) bytes replayed, no failure")
        }
    }

    private static func readFile(_ path: String) -> [UInt8]? {
        guard let file = fopen(path, "rb") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let read = chunk.withUnsafeMutableBytes { fread($0.baseAddress, 1, $0.count, file) }
            bytes += chunk[..<read]
            if read < chunk.count { return ferror(file) == 0 ? bytes : nil }
        }
    }
}
#endif
