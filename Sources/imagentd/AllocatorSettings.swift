import CMalloc

/// glibc's allocator settings for the daemon, set before anything else allocates.
///
/// With many large messages in flight (256 of 64 KiB), memory is freed in runs of megabytes at
/// the top of an arena: the SENDs a commit has stored, a window acknowledged. By default glibc
/// gives such a run back to the kernel as soon as it passes its trim threshold (128 KiB,
/// sliding up with the largest block freed), and the next messages fault the same pages in
/// again, each one zeroed by the kernel. Up to `trimThreshold` of free memory stays in each
/// arena instead: 16 MiB covers what the memory budget's windows and a batch of SENDs being
/// stored free at once (with 4 MiB, a stream of 64 KiB messages still faulted about 24,000
/// pages a second, 5 % of the daemon's CPU). It does not raise the peak, which is what the
/// daemon used; `MemoryTrimmer` gives it all back once traffic stops. Setting the trim
/// threshold stops glibc's sliding mmap threshold too, so that one is fixed here, above the
/// 128 KiB buffers a 64 KiB frame is gathered or read into: only blocks larger than
/// `mmapThreshold` (a 1 MiB message's) are mapped on their own.
enum AllocatorSettings {
    static let mmapThreshold: Int32 = 1 << 20
    static let trimThreshold: Int32 = 16 << 20

    static func apply() {
        _ = mallopt(M_MMAP_THRESHOLD, mmapThreshold)
        _ = mallopt(M_TRIM_THRESHOLD, trimThreshold)
    }
}
