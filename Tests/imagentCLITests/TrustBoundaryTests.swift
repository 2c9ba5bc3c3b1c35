import AgentIPC
import Foundation
import IMAgentTestKit
import RefServer
import Testing

/// The trust boundaries of the real daemon (imagentd(8), SECURITY): a private
/// store whatever the umask, plaintext refused off the host, redirects that
/// cannot carry the token elsewhere. Each test runs the `imagentd` binary.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct TrustBoundaryTests {
    /// The daemon started with `umask` as its own.
    private func launch(_ setup: RealDaemon.Setup, umask: String) async throws -> ChildProcess {
        try await RealDaemon.launch(setup, RealDaemon.Start(umask: umask)).process
    }

    private func stop(_ process: ChildProcess) async {
        await process.stop(grace: .seconds(5))
    }

    private func mode(_ path: String) -> mode_t {
        var status = stat()
        return stat(path, &status) == 0 ? status.st_mode & 0o7777 : 0o7777
    }

    @Test(arguments: ["022", "027", "000"])
    func theStoreIsPrivate_whateverTheUmask(umask: String) async throws {
        // A store directory that does not exist yet: the daemon creates it.
        let setup = try await RealDaemon.prepare(.referenceServer()) { $0.storeDirectory += "/store" }
        defer { try? FileManager.default.removeItem(atPath: setup.directory) }
        let store = setup.directory + "/store"

        let process = try await launch(setup, umask: umask)
        do {
            let client = try await IPCClient.connect(socketPath: setup.socketPath, clientName: "umask-\(umask)")
            let session = try await client.open(service: "sink").session
            _ = try await client.send(session: session, text: "a payload no other user may read")
            await client.close()
            #expect(mode(store) == 0o700, "store directory under umask \(umask): \(String(mode(store), radix: 8))")
            let files = try FileManager.default.contentsOfDirectory(atPath: store)
            #expect(files.contains("imagentd.sqlite3") && files.contains("imagentd.sqlite3-wal"), "\(files)")
            for file in files {
                #expect(mode(store + "/" + file) == 0o600, "\(file) under umask \(umask): \(String(mode(store + "/" + file), radix: 8))")
            }
            #expect(mode(setup.socketPath) == 0o600, "the socket keeps its configured mode")
            let admin = IPCSocketPath.adminPath(for: setup.socketPath)
            #expect(mode(admin) == 0o600, "the admin socket under umask \(umask): \(String(mode(admin), radix: 8))")
        } catch {
            Issue.record("\(error); log: \((try? String(contentsOfFile: setup.directory + "/imagentd.log", encoding: .utf8)) ?? "")")
        }
        await stop(process)
        try? await setup.server.stop()
    }

    @Test func plaintextToANonLoopbackEndpoint_isRefusedByCheckConfigAndAtStart_unlessAllowed() async throws {
        let directory = try FakeDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/plain.toml"
        let base = """
            [server]
            endpoints = ["192.0.2.10:7443"]
            tls = false
            [auth]
            token_file = "\(directory)/token"
            [ipc]
            socket = "\(directory)/imagent.sock"
            mode = "0600"
            [store]
            directory = "\(directory)/store"
            [network]
            watch = false

            """
        try "token\n".write(toFile: directory + "/token", atomically: true, encoding: .utf8)
        try base.write(toFile: file, atomically: true, encoding: .utf8)
        let checked = try await run(RealDaemon.binary, ["--check-config", file])
        #expect(checked.status == 78)
        #expect(checked.stderr.contains("\(file):3: server: TLS is off and \"192.0.2.10:7443\" is not a loopback address"), "\(checked.stderr)")
        let started = try await run(RealDaemon.binary, ["--config", file])
        #expect(started.status == 78, "\(started.stderr)")

        // Said explicitly: valid, and warned about at start.
        try base.replacingOccurrences(of: "tls = false\n", with: "tls = false\nallow_plaintext = true\n")
            .write(toFile: file, atomically: true, encoding: .utf8)
        let allowed = try await run(RealDaemon.binary, ["--check-config", file])
        #expect(allowed.status == 0, "\(allowed.stderr)")
        #expect(allowed.stderr.contains("\(file): warning: TLS is off ([server] allow_plaintext = true)"), "\(allowed.stderr)")
        let setup = RealDaemon.Setup(directory: directory, configPath: file, socketPath: directory + "/imagent.sock",
                                     server: try await RealDaemon.prepare().server)
        let process = try await launch(setup, umask: "022")
        await stop(process)
        try? await setup.server.stop()
        let log = (try? String(contentsOfFile: directory + "/imagentd.log", encoding: .utf8)) ?? ""
        #expect(log.contains("cross the network to 192.0.2.10:7443 in the clear"), "\(log)")
    }

    @Test func aRedirectToAnUnconfiguredServer_neverSeesTheLogin_whileAnAllowedOneDoes() async throws {
        let target = try await RealDaemon.prepare()
        defer { try? FileManager.default.removeItem(atPath: target.directory) }
        let targetServer: RefServer = target.server

        // Not allowed: the daemon stays with its configured server, and the target sees no LOGIN.
        try await withRealDaemon { daemon in
            _ = try await daemon.waitForLink("connected")
            #expect(await daemon.server.execute(line: "goaway SHUTDOWN 0 redirect \(targetServer.address)").hasPrefix("ok"))
            try await Task.sleep(for: .seconds(1))
            let status = try await daemon.waitForLink("connected")
            #expect((status["link"] as? [String: Any])?["endpoint"] as? String == daemon.server.address)
            #expect(try await logins(targetServer) == 0, "the unconfigured server received a LOGIN")
            #expect(daemon.log.contains("REDIRECT to \(targetServer.address) ignored"), "\(daemon.log)")
        }
        // Allowed by [server] redirect_allow: followed (the control that shows the redirect was real).
        try await withRealDaemon(extraConfig: "") { daemon in
            var config = try String(contentsOfFile: daemon.configPath, encoding: .utf8)
            config = config.replacingOccurrences(of: "tls = false\n", with: "tls = false\nredirect_allow = [\"\(targetServer.address)\"]\n")
            try config.write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
            let restarted = try await daemon.restartedAfterStop()
            defer { restarted.signal(SIGKILL) }
            _ = try await restarted.waitForLink("connected")
            #expect(await restarted.server.execute(line: "goaway SHUTDOWN 0 redirect \(targetServer.address)").hasPrefix("ok"))
            let deadline = ContinuousClock.now + .seconds(10)
            while ContinuousClock.now < deadline, try await logins(targetServer) == 0 {
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(try await logins(targetServer) == 1)
        }
        try? await targetServer.stop()
    }

    @Test func aClientThatStopsReading_isClosedAfterItsLastError_withinTheBound() async throws {
        try await withRealDaemon { daemon in
            let observer = try await IPCClient.connect(socketPath: daemon.socketPath, clientName: "observer")
            let stalled = try RawIPCSocket(path: daemon.socketPath)
            #expect(stalled.write(RawIPCSocket.hello()))
            guard case .frame(let welcome) = stalled.read() else {
                Issue.record("no WELCOME")
                return
            }
            #expect(welcome.op == 0x8001)
            // STATUS requests it never reads the answers to: more than the socket buffers hold,
            // less than the 1 MiB after which the daemon stops reading it (and would never see
            // the protocol violation below).
            var requests: [UInt8] = []
            for request in 2..<300 { requests += RawIPCSocket.frame(op: 0x0010, request: UInt32(request)) }
            #expect(stalled.write(requests))
            try await Task.sleep(for: .milliseconds(500))
            #expect(try await clients(observer) == 2)
            // A protocol violation: the daemon's last ERROR cannot leave, yet the connection must go.
            #expect(stalled.write(RawIPCSocket.hello(request: 9_999)))
            let start = ContinuousClock.now
            while try await clients(observer) > 1, ContinuousClock.now - start < .seconds(10) {
                try await Task.sleep(for: .milliseconds(100))
            }
            let took = ContinuousClock.now - start
            print("a client that stopped reading was closed \(took) after its protocol error")
            #expect(try await clients(observer) == 1)
            #expect(took < .seconds(5))
            await observer.close()
        }
    }

    private func clients(_ client: IPCClient) async throws -> Int {
        let status = try JSONSerialization.jsonObject(with: Data(try await client.status().utf8)) as? [String: Any]
        return (status?["daemon"] as? [String: Any])?["clients"] as? Int ?? -1
    }

    private func logins(_ server: RefServer) async throws -> Int {
        let stats = await server.execute(line: "stats")
        let json = stats.drop { $0 != "{" }
        let object = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
        // Accepted or refused: either way the token reached that server.
        return (object?["logins"] as? Int ?? -1) + (object?["logins_rejected"] as? Int ?? 0)
    }
}

extension RealDaemon {
    /// Stops this daemon (its server keeps running) and starts a new one on the same files.
    func restartedAfterStop() async throws -> RealDaemon {
        process.terminate()
        _ = await waitForExit(within: .seconds(5))
        return try await restarted()
    }
}
