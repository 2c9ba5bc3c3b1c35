import Glibc
import IMAgentTestKit
import Testing

@testable import IMAgentCore

@Suite struct SocketActivationTests {
    /// A socket of `type` in a fresh directory, and a cleanup.
    private func socketInTemporaryDirectory(type: Int32, listen: Bool) throws -> (fd: Int32, cleanup: () -> Void) {
        let directory = try makeTemporaryDirectory(prefix: "imagent-test")
        let path = directory + "/imagent.sock"
        let fd = try makeUnixSocket(type: type, path: path, listen: listen)
        return (fd, { close(fd); unlink(path); rmdir(directory) })
    }

    @Test func acceptsAListeningUnixStreamSocket() throws {
        let socket = try socketInTemporaryDirectory(type: Int32(SOCK_STREAM.rawValue), listen: true)
        defer { socket.cleanup() }
        #expect(try SocketActivation.verified([socket.fd]) == [socket.fd])
    }

    @Test func refusesAUnixStreamSocketThatDoesNotListen() throws {
        let socket = try socketInTemporaryDirectory(type: Int32(SOCK_STREAM.rawValue), listen: false)
        defer { socket.cleanup() }
        #expect(throws: SocketActivation.Failure.notAUnixStreamListener(fd: socket.fd)) {
            try SocketActivation.verified([socket.fd])
        }
    }

    @Test func refusesADatagramSocket() throws {
        let socket = try socketInTemporaryDirectory(type: Int32(SOCK_DGRAM.rawValue), listen: false)
        defer { socket.cleanup() }
        #expect(throws: SocketActivation.Failure.notAUnixStreamListener(fd: socket.fd)) {
            try SocketActivation.verified([socket.fd])
        }
    }

    @Test func refusesAPipe() throws {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        defer { close(ends[0]); close(ends[1]) }
        #expect(throws: SocketActivation.Failure.notAUnixStreamListener(fd: ends[0])) {
            try SocketActivation.verified([ends[0]])
        }
    }

    @Test func failureNamesTheFixInTheSocketUnit() {
        #expect("\(SocketActivation.Failure.notAUnixStreamListener(fd: 3))".contains("ListenStream="))
    }
}

extension ProcessEnvironment {
    @Suite struct ListenFDsTests {
        @Test func noSockets_whenNotActivated() throws {
            let sockets = try withEnvironment(["LISTEN_FDS": nil, "LISTEN_PID": nil, "LISTEN_FDNAMES": nil]) {
                try SocketActivation.listeningSockets()
            }
            #expect(sockets == [])
        }

        @Test func noSockets_andTheVariablesAreCleared_whenTheyWereMeantForAnotherProcess() throws {
            let (sockets, leftOver) = try withEnvironment(["LISTEN_FDS": "1", "LISTEN_PID": "\(getpid() + 1)", "LISTEN_FDNAMES": "imagent.sock"]) {
                (try SocketActivation.listeningSockets(), ["LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES"].filter { (name: String) in getenv(name) != nil })
            }
            #expect(sockets == [])
            // Cleared so that a token_command the daemon starts is not fooled either.
            #expect(leftOver == [])
        }

        @Test func failure_whenListenFDsIsMalformed() {
            let result = withEnvironment(["LISTEN_FDS": "many", "LISTEN_PID": "\(getpid())"]) {
                Result { () throws(SocketActivation.Failure) in try SocketActivation.listeningSockets() }
            }
            #expect(throws: SocketActivation.Failure.listenFDs(errno: EINVAL)) { try result.get() }
        }
    }
}
