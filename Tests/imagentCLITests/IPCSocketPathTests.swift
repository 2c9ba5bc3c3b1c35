import AgentIPC
import Testing

/// The socket lookup order of `ipc.md` section 1, every branch.
@Suite struct IPCSocketPathTests {
    private func resolve(explicit: String? = nil, environment: [String: String] = [:],
                         existing: Set<String> = []) -> IPCSocketPath {
        IPCSocketPath.resolve(explicit: explicit, environment: { environment[$0] }, exists: existing.contains)
    }

    @Test func anExplicitPathWins_evenOverTheEnvironment() {
        let path = resolve(explicit: "/tmp/a.sock", environment: ["IMAGENT_SOCKET": "/tmp/b.sock"],
                           existing: [IPCSocketPath.systemPath])
        #expect(path == IPCSocketPath(path: "/tmp/a.sock", source: .explicit))
    }

    @Test func theEnvironmentComesNext_existingOrNot() {
        let path = resolve(environment: ["IMAGENT_SOCKET": "/tmp/b.sock"], existing: [IPCSocketPath.systemPath])
        #expect(path == IPCSocketPath(path: "/tmp/b.sock", source: .environment))
    }

    @Test func anEmptyVariableCountsAsUnset() {
        #expect(resolve(environment: ["IMAGENT_SOCKET": ""], existing: [IPCSocketPath.systemPath]).source == .system)
    }

    @Test func theSystemSocketIsPreferred_whenItExists() {
        let path = resolve(environment: ["XDG_RUNTIME_DIR": "/run/user/1000"],
                           existing: [IPCSocketPath.systemPath, "/run/user/1000/imagent/imagent.sock"])
        #expect(path == IPCSocketPath(path: "/run/imagent/imagent.sock", source: .system))
    }

    @Test func theUserSocketIsUsed_whenTheSystemOneIsAbsent() {
        let path = resolve(environment: ["XDG_RUNTIME_DIR": "/run/user/1000/"],
                           existing: ["/run/user/1000/imagent/imagent.sock"])
        #expect(path == IPCSocketPath(path: "/run/user/1000/imagent/imagent.sock", source: .user))
    }

    @Test func withNeither_theSystemPathIsNamed_andTheUserPathListedAsTried() {
        let path = resolve(environment: ["XDG_RUNTIME_DIR": "/run/user/1000"])
        #expect(path == IPCSocketPath(path: IPCSocketPath.systemPath, source: .system,
                                      alsoTried: ["/run/user/1000/imagent/imagent.sock"]))
        #expect(resolve() == IPCSocketPath(path: IPCSocketPath.systemPath, source: .system))
    }
}
