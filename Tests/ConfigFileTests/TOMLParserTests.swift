import ConfigFile
import Testing

@Suite struct TOMLParserTests {
    @Test func parsesTheConfigurationSubset_withLinesOfEveryKey() throws {
        let document = try TOMLParser.parse("""
            # imagentd.toml
            [server]
            endpoints = [
                "a.example:7443",  # first
                'b.example:7443',
            ]
            tls = false

            [server.tls_extra]
            name = "x\\ty\\u00e9"
            [heartbeat]
            min_seconds = 1_5
            max_seconds = 0x12C
            ratio = 0.25
            dotted.key = -3
            """)
        let server = try #require(document["server"])
        #expect(server.line == 2)
        guard case .table(let table) = server.value else { Issue.record("server is not a table"); return }
        #expect(table["endpoints"]?.value == .array([.string("a.example:7443"), .string("b.example:7443")]))
        #expect(table["endpoints"]?.line == 3)
        #expect(table["tls"]?.value == .boolean(false))
        #expect(table["tls"]?.line == 7)
        guard case .table(let extra) = table["tls_extra"]?.value else { Issue.record("no tls_extra"); return }
        #expect(extra["name"]?.value == .string("x\tyé"))
        guard case .table(let heartbeat) = document["heartbeat"]?.value else { Issue.record("no heartbeat"); return }
        #expect(heartbeat["min_seconds"]?.value == .integer(15))
        #expect(heartbeat["max_seconds"]?.value == .integer(300))
        #expect(heartbeat["ratio"]?.value == .float(0.25))
        guard case .table(let dotted) = heartbeat["dotted"]?.value else { Issue.record("no dotted"); return }
        #expect(dotted["key"]?.value == .integer(-3))
        #expect(dotted["key"]?.line == 15)
    }

    @Test(arguments: [
        ("a = 1\na = 2", "2:1: \"a\" is set twice (first on line 1)"),
        ("[t]\n[t]", "2:1: table [t] is defined twice (first on line 1)"),
        ("a = hello", "1:5: \"hello\" is not a TOML value (strings need quotes)"),
        ("a = \"open", "1:10: unterminated string"),
        ("a = {b = 1}", "1:5: inline tables are not supported here; write a [table] section instead"),
        ("a = 1 b = 2", "1:7: unexpected text after the value; one key = value per line"),
        ("[[x]]", "1:2: arrays of tables ([[…]]) are not supported here"),
        ("a = [1, 2", "1:10: expected , or ] in the array"),
        ("a = 1\na.b = 2", "2:1: \"a\" is an integer (line 1), not a table"),
        ("a = 01", "1:5: \"01\" is not a TOML value (strings need quotes)"),
        ("= 1", "1:1: expected a key"),
        ("a = \"\\q\"", "1:8: invalid escape \\q"),
    ])
    func refusesWhatItCannotRead_withLineAndColumn(text: String, message: String) {
        #expect(throws: (any Error).self) { _ = try TOMLParser.parse(text) }
        do {
            _ = try TOMLParser.parse(text)
        } catch {
            #expect(error.description == message)
        }
    }

    @Test func acceptsCRLFAndEmptyDocuments() throws {
        #expect(try TOMLParser.parse("").entries.isEmpty)
        let document = try TOMLParser.parse("a = 1\r\n\r\nb = 'x'\r\n")
        #expect(document["b"]?.line == 3)
    }
}
