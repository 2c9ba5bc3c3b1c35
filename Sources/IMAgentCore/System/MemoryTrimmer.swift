import CMalloc
import NIOCore

/// Gives the allocator's free memory back to the kernel once message traffic
/// has stopped for `quietPeriod`.
///
/// glibc keeps freed memory for reuse, and after a burst of large messages
/// (64 KiB payloads, 256 in flight) that is tens of megabytes the daemon no
/// longer uses; `malloc_trim(0)` returns every free page. Making the allocator
/// map large blocks on their own instead (`M_MMAP_THRESHOLD` = 64 KiB) did the
/// same but cost an mmap and munmap per 64 KiB socket read buffer, which lowered
/// the benchmark's rates for every message size. The timer is armed only while
/// there is traffic (one wake-up per quiet period at most), so an idle daemon is
/// not woken by it.
final class MemoryTrimmer {
    private let loop: EventLoop
    private let quietPeriod: TimeAmount
    private var armed = false
    /// Traffic since the timer was armed: arm it again instead of trimming.
    private var busy = false

    init(loop: EventLoop, quietPeriod: TimeAmount = .seconds(2)) {
        self.loop = loop
        self.quietPeriod = quietPeriod
    }

    /// Something happened on the message path. Call on `loop`.
    func activity() {
        busy = true
        guard !armed else { return }
        arm()
    }

    private func arm() {
        armed = true
        busy = false
        loop.assumeIsolated().scheduleTask(in: quietPeriod) { [self] in
            if busy {
                arm()
            } else {
                armed = false
                _ = malloc_trim(0)
            }
        }
    }
}
