/// Notices that the machine was suspended, from two clocks read together:
/// CLOCK_BOOTTIME keeps counting while the machine sleeps, CLOCK_MONOTONIC
/// does not. Between two samples both advance alike while awake; if boottime
/// ran ahead by more than `threshold`, the machine slept for about that
/// difference, and the link's NAT mappings and TCP state may be gone.
///
/// The I/O layer samples both clocks (as nanoseconds) whenever it wakes, for
/// a timer or a frame; the detector only compares numbers.
struct SuspendDetector: Hashable, Sendable {
    /// Reading the two clocks one after the other skews them by microseconds;
    /// one second is far above that and far below any real suspend.
    let threshold: Duration
    private var last: Sample?

    private struct Sample: Hashable, Sendable {
        var boottime: UInt64
        var monotonic: UInt64
    }

    init(threshold: Duration = .seconds(1)) {
        self.threshold = threshold
    }

    /// Records a sample; returns how long the machine slept since the previous
    /// sample, or nil when it did not (or this is the first sample).
    mutating func sample(boottimeNanoseconds boottime: UInt64, monotonicNanoseconds monotonic: UInt64) -> Duration? {
        defer { last = Sample(boottime: boottime, monotonic: monotonic) }
        guard let last else { return nil }
        let boottimeAdvance = Int64(truncatingIfNeeded: boottime &- last.boottime)
        let monotonicAdvance = Int64(truncatingIfNeeded: monotonic &- last.monotonic)
        let slept = Duration.nanoseconds(boottimeAdvance - monotonicAdvance)
        return slept > threshold ? slept : nil
    }
}
