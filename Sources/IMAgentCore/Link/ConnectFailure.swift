import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Whether a failed TCP connect means the path is silent (nothing came back
/// from the server's side: the connect timed out, or a router reported the
/// host or network unreachable) rather than a refusal (RST: connection
/// refused or reset). The reconnect policy probes the first and backs off
/// from the second (`ReconnectPolicy`, failure classes).
func isSilent(_ error: any Error) -> Bool {
    switch error {
    case ChannelError.connectTimeout:
        return true
    case let error as NIOConnectionError:
        // Happy Eyeballs: silent only when every address was.
        return !error.connectionErrors.isEmpty && error.connectionErrors.allSatisfy { isSilent($0.error) }
    case let error as IOError:
        return [ETIMEDOUT, EHOSTUNREACH, ENETUNREACH].contains(error.errnoCode)
    default:
        return false
    }
}
