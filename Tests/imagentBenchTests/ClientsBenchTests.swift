import Testing

@testable import imagent_bench

/// `imagent-bench clients` reads each driver's last line, the `bench` report of clients/conformance/README.md.
@Suite struct ClientsBenchTests {
    @Test func aBenchReport_givesItsRateAndPercentiles() {
        let report = ClientBenchReport(
            reportLine: #"{"scenario":"bench","size":1024,"oneway_msgs_per_s":5234.7,"rtt_p50_us":251,"rtt_p99_us":1.2e3}"#)
        #expect(report == ClientBenchReport(onewayPerSecond: 5234.7, rttP50Microseconds: 251, rttP99Microseconds: 1200))
        // As Python's json.dumps writes it.
        let spaced = ClientBenchReport(
            reportLine: #"{"scenario": "bench", "size": 64, "oneway_msgs_per_s": 610.85, "rtt_p50_us": 4528.8, "rtt_p99_us": 13876.7}"#)
        #expect(spaced == ClientBenchReport(onewayPerSecond: 610.85, rttP50Microseconds: 4528.8, rttP99Microseconds: 13876.7))
    }

    @Test func anotherScenarioOrAMissingMember_isNoReport() {
        #expect(ClientBenchReport(reportLine: #"{"scenario":"echo","sent":100}"#) == nil)
        #expect(ClientBenchReport(reportLine: #"{"scenario":"bench","error":"DAEMON_UNAVAILABLE"}"#) == nil)
        #expect(ClientBenchReport(reportLine: #"{"scenario":"bench","size":64,"oneway_msgs_per_s":10,"rtt_p50_us":5}"#) == nil)
    }

    @Test func everyLibraryHasADriverPath() {
        #expect(ClientLibrary.c.driverFile.hasSuffix("/clients/c/build/imagent-conformance-c"))
        #expect(ClientLibrary.python.driverFile.hasSuffix("/clients/python/tests/conformance_driver.py"))
        #expect(ClientLibrary.swift.driverFile.hasSuffix("/imagent-conformance"))
    }
}
