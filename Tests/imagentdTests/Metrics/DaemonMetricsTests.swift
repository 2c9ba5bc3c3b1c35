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
        #expect(metrics.stageDurations[.tcp]?.count == 2)
    }
}

@Suite struct DaemonMetricsHistogramTests {
    private func exposition(_ metrics: DaemonMetrics) -> String {
        String(decoding: metrics.exposition(), as: UTF8.self)
    }

    @Test func storeCommits_fillTheCommitTimeAndBatchSizeHistograms() {
        let metrics = DaemonMetrics(version: "9.9.9")
        let observer = metrics.storeCommitObserver
        observer(.microseconds(200), 1)
        observer(.milliseconds(20), 300)
        let text = exposition(metrics)
        #expect(text.contains("# TYPE imagentd_store_commit_seconds histogram"))
        #expect(text.contains("imagentd_store_commit_seconds_bucket{le=\"0.00025\"} 1"))
        #expect(text.contains("imagentd_store_commit_seconds_count 2"))
        #expect(text.contains("# TYPE imagentd_store_commit_operations histogram"))
        #expect(text.contains("imagentd_store_commit_operations_bucket{le=\"1.0\"} 1"))
        #expect(text.contains("imagentd_store_commit_operations_bucket{le=\"256.0\"} 1"))
        #expect(text.contains("imagentd_store_commit_operations_bucket{le=\"512.0\"} 2"))
        #expect(text.contains("imagentd_store_commit_operations_sum 301.0"))
        #expect(metrics.storeCommitOperations.count == 2)
        #expect(metrics.storeCommitDurations.sum == .microseconds(20_200))
    }

    @Test func everyReconnectCause_isExported_atZeroBeforeItHappens() {
        let metrics = DaemonMetrics(version: "9.9.9")
        metrics.reconnectsByCause[.pathSilent]?.update(to: 2)
        let text = exposition(metrics)
        #expect(text.contains("# TYPE imagentd_link_reconnects_by_cause_total counter"))
        #expect(text.contains("imagentd_link_reconnects_by_cause_total{cause=\"path_silent\"} 2"))
        for cause in ["server_refusing", "server_overloaded", "other"] {
            #expect(text.contains("imagentd_link_reconnects_by_cause_total{cause=\"\(cause)\"} 0"))
        }
    }

    @Test func rttSamplesAndSendAckLatencies_landInTheirHistograms() {
        let metrics = DaemonMetrics(version: "9.9.9")
        metrics.roundTrips.record(.milliseconds(2))
        metrics.sendAckLatency.record(.milliseconds(7))
        metrics.sendAckLatency.record(.milliseconds(70))
        let text = exposition(metrics)
        #expect(text.contains("imagentd_link_round_trip_seconds_bucket{le=\"0.005\"} 1"))
        #expect(text.contains("imagentd_send_ack_seconds_bucket{le=\"0.01\"} 1"))
        #expect(text.contains("imagentd_send_ack_seconds_bucket{le=\"0.1\"} 2"))
        #expect(text.contains("imagentd_send_ack_seconds_count 2"))
    }
}
