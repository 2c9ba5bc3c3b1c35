#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// `watch` and `listen` run until Ctrl-C. That is how they are meant to end,
/// not a failure, so SIGINT and SIGTERM exit with status 0. Every line is
/// flushed as it is printed, and `listen` acknowledges a message only after
/// printing it, so nothing is lost by exiting at any point.
enum Interrupt {
    static func exitQuietly() {
        signal(SIGINT) { _ in _exit(0) }
        signal(SIGTERM) { _ in _exit(0) }
    }
}
