#if canImport(Glibc)
import Glibc
#endif

/// What the fuzz targets do in a normal build, where libFuzzer is absent:
/// replay the files named on the command line through the fuzz entry point,
/// so the targets always build and a crashing input can be rerun and debugged
/// without the sanitizers.
///
/// The fuzzing build (`scripts/fuzz`) passes `-DFUZZING`, which leaves each
/// target's `@main` out: libFuzzer brings its own `main`, which calls
/// `LLVMFuzzerTestOneInput`, and a second entry point would not link.
public func replayInputs(tool: String, through fuzz: (UnsafeRawPointer, Int) -> CInt) {
    let paths = CommandLine.arguments.dropFirst()
    guard !paths.isEmpty else {
        print("usage: \(tool) FILE…  (replays inputs; scripts/fuzz builds the fuzzing variant)")
        exit(2)
    }
    for path in paths {
        guard let bytes = readWholeFile(path) else {
            print("\(path): cannot read")
            exit(1)
        }
        _ = bytes.withUnsafeBytes { fuzz($0.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, $0.count) }
        print("\(path): \(bytes.count) bytes replayed, no failure")
    }
}

private func readWholeFile(_ path: String) -> [UInt8]? {
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
