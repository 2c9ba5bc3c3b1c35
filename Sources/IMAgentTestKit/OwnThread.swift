#if canImport(Glibc)
import Glibc
#endif

/// Runs long, synchronous CPU work (a simulation of thousands of agents) on
/// a thread of its own and awaits its result. On Swift concurrency's
/// cooperative pool, which has one thread per core, such work would starve
/// every other test running in parallel for its whole duration.
public func onOwnThread<Result: Sendable>(_ work: @escaping @Sendable () -> Result) async -> Result {
    await withCheckedContinuation { continuation in
        let job = OwnThreadJob { continuation.resume(returning: work()) }
        let context = Unmanaged.passRetained(job).toOpaque()
        var thread = pthread_t()
        let started = pthread_create(&thread, nil, { context in
            let job = Unmanaged<OwnThreadJob>.fromOpaque(context!).takeRetainedValue()
            job.body()
            return nil
        }, context)
        if started == 0 {
            pthread_detach(thread)
        } else {
            // No thread to be had: do the work here rather than not at all.
            Unmanaged<OwnThreadJob>.fromOpaque(context).takeRetainedValue().body()
        }
    }
}

private final class OwnThreadJob: @unchecked Sendable {
    let body: () -> Void
    init(_ body: @escaping () -> Void) { self.body = body }
}
