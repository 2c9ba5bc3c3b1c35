import Testing

@testable import imagent_bench

/// `imagent-bench idle`'s PSS by mapping, from smaps text as the kernel writes it.
struct PSSBreakdownTests {
    static let smaps = """
        55d0c0000000-55d0c0800000 r-xp 00000000 fd:01 123 /usr/sbin/imagentd
        Size:               8192 kB
        Pss:                5000 kB
        55d0c0800000-55d0c0900000 r--p 00800000 fd:01 123 /usr/sbin/imagentd
        Pss:                 600 kB
        7f0000000000-7f0000100000 rw-p 00000000 00:00 0
        Pss:                 900 kB
        7f0000100000-7f0000200000 r-xp 00000000 fd:01 456 /usr/lib/x86_64-linux-gnu/libsqlite3.so.0.8.6
        Pss:                 700 kB
        7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
        Pss:                  24 kB
        """

    @Test func pssIsSummedPerMappedFile_andSplitIntoTheExecutableTheLibrariesAndAnonymous() {
        let breakdown = PSSBreakdown(smaps: Self.smaps)
        #expect(breakdown.byPath == ["/usr/sbin/imagentd": 5600, "": 924, "/usr/lib/x86_64-linux-gnu/libsqlite3.so.0.8.6": 700])
        let split = breakdown.split(executable: "/usr/sbin/imagentd")
        #expect(split.executable == 5600 && split.libraries == 700 && split.anonymous == 924)
        #expect(breakdown.largest(2).map(\.kB) == [5600, 924])
    }
}
