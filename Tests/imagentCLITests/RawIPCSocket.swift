import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A blocking Unix-socket client that writes whatever bytes it is given and
/// reads raw frames back: for hostile clients, which the Swift client library
/// (rightly) cannot be made to be. Every read has a deadline, so a daemon
/// that neither answers nor closes fails the test instead of hanging it.
final class RawIPCSocket: @unchecked Sendable {  // used by one thread at a time
    struct Frame: CustomStringConvertible, Sendable {
        var op: UInt16
        var request: UInt32
        var records: [UInt16: [UInt8]]

        var code: UInt16? {
            guard let value = records[0x0020], value.count == 2 else { return nil }
            return UInt16(value[0]) << 8 | UInt16(value[1])
        }

        var description: String {
            let message = records[0x0021].map { String(decoding: $0, as: UTF8.self) } ?? ""
            return String(format: "op 0x%04x request %u code %@ %@", op, request, code.map { "\($0)" } ?? "-", message)
        }
    }

    enum ReadResult {
        case frame(Frame)
        /// The daemon closed the connection (EOF or reset).
        case closed
        case timedOut
    }

    private let fd: Int32
    private var buffer: [UInt8] = []

    /// `timeout` bounds each read, and each write unless `writeTimeout` says otherwise: a write
    /// the daemon holds back on purpose (its back-pressure) needs longer than a read.
    init(path: String, timeout: Duration = .seconds(10), writeTimeout: Duration? = nil) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        var time = timeval(tv_sec: Int(timeout.components.seconds), tv_usec: 0)
        var writeTime = timeval(tv_sec: Int((writeTimeout ?? timeout).components.seconds), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &writeTime, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in raw.copyBytes(from: path.utf8.prefix(raw.count - 1)) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        // No close here: an initializer that throws once every stored property is set still
        // runs `deinit`, which closes `fd`. Closing it here too closed it twice, and the second
        // close could hit a descriptor another thread had just been given (seen: a socket NIO
        // had just accepted, whose getsockname then failed with EBADF and crashed the run).
        guard connected == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
    }

    deinit {
        if fd >= 0 { Glibc.close(fd) }
    }

    /// Writes everything it can; false once the daemon has closed (EPIPE,
    /// ECONNRESET), which for a hostile frame is an acceptable answer.
    @discardableResult
    func write(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written < 0 {
                if errno == EINTR { continue }
                return false
            }
            offset += written
        }
        return true
    }

    /// No more bytes from this side: the daemon sees end-of-file.
    func shutdownWrite() { shutdown(fd, Int32(SHUT_WR)) }

    func read() -> ReadResult {
        while true {
            if buffer.count >= 10 {
                let length = Int(buffer[0]) << 24 | Int(buffer[1]) << 16 | Int(buffer[2]) << 8 | Int(buffer[3])
                if buffer.count >= 4 + length, length >= 6 {
                    let frame = Self.parse(Array(buffer[4..<(4 + length)]))
                    buffer.removeFirst(4 + length)
                    return .frame(frame)
                }
            }
            var chunk = [UInt8](repeating: 0, count: 65_536)
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                buffer += chunk[0..<count]
            } else if count == 0 {
                return .closed
            } else if errno == EINTR {
                continue
            } else if errno == EAGAIN || errno == EWOULDBLOCK {
                return .timedOut
            } else {
                return .closed
            }
        }
    }

    /// The next frame that is not an event (0x9001–0x9010, which a session's state changes send).
    func readReply() -> ReadResult {
        while true {
            let result = read()
            if case .frame(let frame) = result, (0x9001...0x9010).contains(frame.op) { continue }
            return result
        }
    }

    /// Frames until the daemon closes (or the deadline passes).
    func readUntilClosed() -> (frames: [Frame], closed: Bool) {
        var frames: [Frame] = []
        while true {
            switch read() {
            case .frame(let frame): frames.append(frame)
            case .closed: return (frames, true)
            case .timedOut: return (frames, false)
            }
        }
    }

    private static func parse(_ body: [UInt8]) -> Frame {
        let op = UInt16(body[0]) << 8 | UInt16(body[1])
        let request = UInt32(body[2]) << 24 | UInt32(body[3]) << 16 | UInt32(body[4]) << 8 | UInt32(body[5])
        var records: [UInt16: [UInt8]] = [:]
        var index = 6
        while index + 6 <= body.count {
            let tag = UInt16(body[index]) << 8 | UInt16(body[index + 1])
            let size = Int(body[index + 2]) << 24 | Int(body[index + 3]) << 16 | Int(body[index + 4]) << 8 | Int(body[index + 5])
            guard index + 6 + size <= body.count else { break }
            records[tag] = Array(body[(index + 6)..<(index + 6 + size)])
            index += 6 + size
        }
        return Frame(op: op, request: request, records: records)
    }

    // MARK: Building frames, right or wrong

    static func frame(op: UInt16, request: UInt32, records: [(tag: UInt16, value: [UInt8])] = []) -> [UInt8] {
        var body: [UInt8] = []
        for record in records {
            body += be(record.tag) + be(UInt32(record.value.count)) + record.value
        }
        return be(UInt32(6 + body.count)) + be(op) + be(request) + body
    }

    static func hello(request: UInt32 = 1, version: UInt8 = 1, name: String = "hostile") -> [UInt8] {
        frame(op: 0x0001, request: request, records: [(0x0001, [version]), (0x0002, Array(name.utf8))])
    }

    static func be(_ value: UInt16) -> [UInt8] { [UInt8(value >> 8), UInt8(value & 0xFF)] }
    static func be(_ value: UInt32) -> [UInt8] { (0..<4).map { UInt8((value >> (24 - 8 * $0)) & 0xFF) } }
    static func be(_ value: UInt64) -> [UInt8] { (0..<8).map { UInt8((value >> (56 - 8 * $0)) & 0xFF) } }
}

/// Runs `count` blocking workers on their own threads (not the test's
/// cooperative pool, which blocking reads would starve) and waits for all.
func onThreads(_ count: Int, _ work: @escaping @Sendable (Int) -> Void) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let group = DispatchGroup()
        for index in 0..<count {
            group.enter()
            let thread = Thread {
                work(index)
                group.leave()
            }
            thread.stackSize = 1 << 20
            thread.start()
        }
        group.notify(queue: .global()) { continuation.resume() }
    }
}

/// The resident set size of a process, in KiB, from `/proc/PID/status`.
func residentKiB(of pid: Int32) -> Int? {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
    for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
    }
    return nil
}
