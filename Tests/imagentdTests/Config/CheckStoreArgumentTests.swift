import Testing

@testable import imagentd

/// `imagentd --check-store [--config FILE]` (imagentd(8), OPTIONS).
@Suite struct CheckStoreArgumentTests {
    @Test func checkStore_isAFlagThatGoesWithConfig() throws {
        let parsed = try DaemonArguments(parsing: ["--check-store", "--config", "/etc/imagent/alice.toml"])
        #expect(parsed.checkStore && parsed.configPath == "/etc/imagent/alice.toml" && parsed.action == .run)
        #expect(try !DaemonArguments(parsing: []).checkStore)
    }

    @Test func checkStore_takesNoValue() {
        #expect(throws: DaemonArguments.UsageError.self) { try DaemonArguments(parsing: ["--check-store=yes"]) }
    }

    @Test func helpNamesItAndItsStatuses() {
        #expect(DaemonArguments.help.contains("--check-store") && DaemonArguments.help.contains("65 when damaged"))
        #expect(DaemonArguments.usage.contains("[--check-store]"))
    }
}
