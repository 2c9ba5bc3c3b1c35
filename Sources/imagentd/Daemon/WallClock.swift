#if canImport(Glibc)
import Glibc
#endif

/// Unix time, for timestamps people read (STATUS, WATCH events).
enum WallClock {
    static func nowMS() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return UInt64(now.tv_sec) * 1000 + UInt64(now.tv_nsec) / 1_000_000
    }
}
