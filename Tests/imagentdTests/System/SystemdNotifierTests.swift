import Glibc
import Testing

@testable import IMAgentCore

extension ProcessEnvironment {
    @Suite struct SystemdNotifierTests {
        let manager: NotifySocketFake

        init() throws {
            manager = try NotifySocketFake()
        }

        private func withNotifySocket(_ body: (SystemdNotifier) -> Void) {
            withEnvironment(["NOTIFY_SOCKET": manager.path]) { body(SystemdNotifier()) }
        }

        @Test func ready_sendsREADYWithTheStatusInOneDatagram() {
            withNotifySocket { $0.ready(status: "connecting to im.example.net:7443") }
            #expect(manager.receive() == "READY=1\nSTATUS=connecting to im.example.net:7443")
        }

        @Test func lifecycle_reachesTheManagerInOrder() {
            withNotifySocket { notifier in
                #expect(notifier.isActive)
                notifier.ready()
                notifier.status("connected to im.example.net:7443, 3 sessions")
                notifier.watchdogPing()
                notifier.stopping(status: "draining")
            }
            #expect(manager.receive() == "READY=1")
            #expect(manager.receive() == "STATUS=connected to im.example.net:7443, 3 sessions")
            #expect(manager.receive() == "WATCHDOG=1")
            #expect(manager.receive() == "STOPPING=1\nSTATUS=draining")
        }

        @Test func reloading_carriesTheMonotonicClockOfNow() throws {
            var before = timespec()
            clock_gettime(CLOCK_MONOTONIC, &before)
            withNotifySocket { $0.reloading() }
            var after = timespec()
            clock_gettime(CLOCK_MONOTONIC, &after)

            let lines = try #require(manager.receive()).split(separator: "\n")
            #expect(lines.first == "RELOADING=1")
            let stamp = try #require(lines.last.flatMap { $0.hasPrefix("MONOTONIC_USEC=") ? UInt64($0.dropFirst(15)) : nil })
            #expect(stamp >= UInt64(before.tv_sec) * 1_000_000 + UInt64(before.tv_nsec) / 1_000)
            #expect(stamp <= UInt64(after.tv_sec) * 1_000_000 + UInt64(after.tv_nsec) / 1_000)
        }

        @Test func extendTimeout_sendsMicroseconds() {
            withNotifySocket { $0.extendTimeout(by: .seconds(90)) }
            #expect(manager.receive() == "EXTEND_TIMEOUT_USEC=90000000")
        }

        @Test func status_keepsAMultiLineTextOnOneLine() {
            withNotifySocket { $0.status("link lost\nretrying in 2 s") }
            #expect(manager.receive() == "STATUS=link lost retrying in 2 s")
        }

        @Test func withoutNotifySocket_nothingIsSentAndNothingFails() {
            withEnvironment(["NOTIFY_SOCKET": nil]) {
                let notifier = SystemdNotifier()
                #expect(!notifier.isActive)
                notifier.ready(status: "up")
                notifier.watchdogPing()
            }
            #expect(manager.receive(timeoutMS: 100) == nil)
        }

        @Test func watchdogInterval_isHalfOfWatchdogUSEC_forThisProcess() {
            withEnvironment(["WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "\(getpid())"]) {
                #expect(SystemdNotifier().watchdogInterval == .seconds(15))
            }
        }

        @Test func watchdogInterval_isNil_whenTheWatchdogIsForAnotherProcessOrUnarmed() {
            withEnvironment(["WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "\(getpid() + 1)"]) {
                #expect(SystemdNotifier().watchdogInterval == nil)
            }
            withEnvironment(["WATCHDOG_USEC": nil, "WATCHDOG_PID": nil]) {
                #expect(SystemdNotifier().watchdogInterval == nil)
            }
        }
    }
}
