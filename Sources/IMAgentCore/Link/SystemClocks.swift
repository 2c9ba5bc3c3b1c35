#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The real clocks behind the cores' instants. CLOCK_MONOTONIC is what
/// `NIODeadline` uses too, so a `MonotonicInstant` converts to a deadline
/// without drift; CLOCK_BOOTTIME only feeds the `SuspendDetector`.
func monotonicNanoseconds() -> UInt64 {
    clockNanoseconds(CLOCK_MONOTONIC)
}

func boottimeNanoseconds() -> UInt64 {
    clockNanoseconds(CLOCK_BOOTTIME)
}

/// Wall-clock Unix time in milliseconds, for status displays only.
func unixMilliseconds() -> UInt64 {
    clockNanoseconds(CLOCK_REALTIME) / 1_000_000
}

private func clockNanoseconds(_ clock: clockid_t) -> UInt64 {
    var spec = timespec()
    clock_gettime(clock, &spec)
    return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
}

extension MonotonicInstant {
    static var now: MonotonicInstant {
        MonotonicInstant(sinceOrigin: .nanoseconds(Int64(monotonicNanoseconds())))
    }
}
