import CConcurrencyHook
import NIOCore
import NIOPosix

/// Swift concurrency's jobs run on NIO's singleton event loop, the daemon's
/// own, instead of libdispatch's worker pool.
///
/// On Linux, the first worker thread libdispatch starts for a global queue also
/// starts its pool monitor, a timer that wakes the process once a second for as
/// long as it lives (`_dispatch_workq_monitor_pools`). The event loop sleeps in
/// `epoll_wait` until there is work.
///
/// Not NIO's `unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()`:
/// it looks the runtime's hook up with dlsym, which finds nothing in a binary
/// with the Swift runtime linked statically (the package), and then leaves
/// every job to libdispatch.
enum ConcurrencyOnEventLoop {
    /// Call before any task runs. False when another hook is installed already (jobs then go to it).
    static func install() -> Bool {
        imagent_route_global_jobs { job in
            // An `UnownedJob` is the job's pointer.
            jobLoop.enqueue(ExecutorJob(unsafeBitCast(job, to: UnownedJob.self)))
        }
    }
}

/// The loop every job goes to (a global: a C function pointer captures nothing).
private let jobLoop = MultiThreadedEventLoopGroup.singleton.next()
