#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Unix time in milliseconds, as SERVER_TIME_MS carries it (NIO's clocks are
/// monotonic, not calendar time); also for timestamps people read.
public enum WallClock {
    public static func nowMS() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return UInt64(now.tv_sec) * 1000 + UInt64(now.tv_nsec) / 1_000_000
    }
}
