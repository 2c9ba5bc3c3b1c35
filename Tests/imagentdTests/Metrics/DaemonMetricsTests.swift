import Testing

@testable import IMAgentCore

@Suite struct DaemonMetricsTests {
    private func exposition(_ metrics: DaemonMetrics) -> String {
        String(decoding: metrics.exposition(), as: UTF8.self)
    }

    @Test func aGaugeWhoseValueIsUnknown_isAbsent_notZero() {
        let metrics = DaemonMetrics(version: "9.9.9", startedAtUnixMS: 1_000)
        metrics.setKnown("imagentd_link_rtt_seconds", help: "RTT.", to: nil)
        #expect(!exposition(metrics).contains("imagentd_link_rtt_seconds"))
        metrics.setKnown("imagentd_link_rtt_seconds", help: "RTT.", to: 0.25)
        #expect(exposition(metrics).contains("imagentd_link_rtt_seconds 0.25"))
        metrics.setKnown("imagentd_link_rtt_seconds", help: "RTT.", to: nil)
        #expect(!exposition(metrics).contains("imagentd_link_rtt_seconds"))
    }

    @Test func mirroredCounters_followTheRunningTotal_andNeverGoDown() {
        let metrics = DaemonMetrics(version: "9.9.9", startedAtUnixMS: 1_000)
        metrics.linkAttempts.update(to: 3)
        metrics.linkAttempts.update(to: 2)
        #expect(exposition(metrics).contains("imagentd_link_connect_attempts_total 3"))
        metrics.linkAttempts.update(to: 7)
        #expect(exposition(metrics).contains("imagentd_link_connect_attempts_total 7"))
    }

    @Test func stageDurations_landInTheirStagesHistogram_withHelpAndType() {
        let metrics = DaemonMetrics(version: "9.9.9", startedAtUnixMS: 1_000)
        metrics.stageCompleted(.tcp, after: .milliseconds(3))
        metrics.stageCompleted(.tcp, after: .milliseconds(40))
        let text = exposition(metrics)
        #expect(text.contains("# TYPE imagentd_link_handshake_stage_seconds histogram"))
        #expect(text.contains("# HELP imagentd_link_handshake_stage_seconds "))
        #expect(text.contains("imagentd_link_handshake_stage_seconds_bucket{stage=\"tcp\",le=\"0.005\"} 1"))
        #expect(text.contains("imagentd_link_handshake_stage_seconds_bucket{stage=\"tcp\",le=\"0.05\"} 2"))
        #expect(text.contains("imagentd_link_handshake_stage_seconds_count{stage=\"tcp\"} 2"))
        #expect(text.contains("imagentd_build_info{version=\"9.9.9\"} 1"))
        #expect(metrics.stageTotals[.tcp]?.count == 2)
    }
}
