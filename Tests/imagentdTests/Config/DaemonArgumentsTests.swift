import Testing

@testable import imagentd

@Suite struct DaemonArgumentsTests {
    @Test func noArguments_runsWithTheDefaultConfigFile() throws {
        let parsed = try DaemonArguments(parsing: [])
        #expect(parsed.action == .run && parsed.configPath == "/etc/imagent/imagentd.toml" && !parsed.development)
    }

    @Test func optionsTakeTheirValue_separatelyOrAfterEquals() throws {
        let parsed = try DaemonArguments(parsing: ["--config", "/a.toml", "--check-config=/b.toml", "--dev", "--dev-dir=/d"])
        #expect(parsed.configPath == "/a.toml" && parsed.checkConfigPath == "/b.toml")
        #expect(parsed.development && parsed.developmentDirectory == "/d")
    }

    @Test func helpAndVersion_areActions() throws {
        #expect(try DaemonArguments(parsing: ["-h"]).action == .help)
        #expect(try DaemonArguments(parsing: ["--help"]).action == .help)
        #expect(try DaemonArguments(parsing: ["--version"]).action == .version)
    }

    @Test func unknownOptions_missingValues_andStrayArguments_areUsageErrors() {
        #expect(throws: DaemonArguments.UsageError.self) { try DaemonArguments(parsing: ["--verbose"]) }
        #expect(throws: DaemonArguments.UsageError.self) { try DaemonArguments(parsing: ["--config"]) }
        #expect(throws: DaemonArguments.UsageError.self) { try DaemonArguments(parsing: ["--config", "--dev"]) }
        #expect(throws: DaemonArguments.UsageError.self) { try DaemonArguments(parsing: ["imagentd.toml"]) }
    }
}
