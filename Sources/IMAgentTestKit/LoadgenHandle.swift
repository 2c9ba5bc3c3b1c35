#if canImport(Glibc)
import Glibc
#endif

/// An `imagent-loadgen` child against a daemon's socket; it ends by itself and prints a JSON report line.
public final class LoadgenHandle: ProgramHandle {
    public let process: ChildProcess
    public let tag: Int
    public let outPath: String
    public let errPath: String
    public var logPath: String { errPath }

    /// What a finished loadgen left: its last output line (the JSON report), its status and its errors.
    public struct Outcome: Sendable {
        public var report: String?
        public var status: Int32
        public var signaled: Bool
        public var stderr: String
    }

    /// Starts `imagent-loadgen --socket SOCKET --tag TAG ARGUMENTS…`.
    public static func start(socketPath: String, tag: Int, arguments: [String], outPath: String, errPath: String,
                             binary: String = BuiltPrograms.loadgen, spawner: ProgramSpawner = .direct) throws -> LoadgenHandle {
        let process = try spawner.spawn("imagent-loadgen \(tag)", binary, ["--socket", socketPath, "--tag", "\(tag)"] + arguments,
                                        outPath, errPath, [:])
        return LoadgenHandle(process: process, tag: tag, outPath: outPath, errPath: errPath)
    }

    private init(process: ChildProcess, tag: Int, outPath: String, errPath: String) {
        self.process = process
        self.tag = tag
        self.outPath = outPath
        self.errPath = errPath
    }

    /// What it left so far (read after it has exited).
    public var outcome: Outcome {
        let report = (readFile(outPath) ?? "").split(separator: "\n").last.map(String.init)
        return Outcome(report: report, status: process.terminationStatus,
                       signaled: process.terminationReason == .uncaughtSignal, stderr: readFile(errPath) ?? "")
    }

    /// Waits for it to exit; after `limit` it is killed and this throws.
    public func wait(within limit: Duration) async throws -> Outcome {
        if await process.exit(within: limit) == nil {
            await kill9()
            throw ChildProcessError("imagent-loadgen \(pid) still ran after \(limit)")
        }
        return outcome
    }

    public func stop(grace: Duration) async { await process.stop(grace: grace) }
}
