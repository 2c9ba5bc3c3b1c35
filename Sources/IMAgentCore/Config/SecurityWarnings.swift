/// What an operator must hear at every start (and reload) about a
/// configuration that is allowed but weakens a trust boundary.
enum SecurityWarnings {
    static func of(_ c: DaemonConfiguration) -> [String] {
        var warnings: [String] = []
        if !c.server.tls.enabled {
            let remote = c.server.endpoints.filter { !(Endpoint(parsing: $0)?.isLoopback ?? false) }
            if !remote.isEmpty {
                warnings.append("TLS is off ([server] allow_plaintext = true): the token and every message cross the network to \(remote.joined(separator: ", ")) in the clear")
            } else if c.server.allowPlaintext {
                warnings.append("[server] allow_plaintext = true: a REDIRECT or a later endpoint off this host would get the token in the clear")
            }
        } else if !c.server.tls.verify {
            warnings.append("[server.tls] verify = false: the server's certificate is not checked, so anyone on the path can pose as the server and read the token")
        }
        if !c.prometheusListen.isEmpty, let endpoint = Endpoint(parsing: c.prometheusListen), !endpoint.isLoopback {
            warnings.append("[metrics] prometheus_allow_remote = true: anyone who can reach \(c.prometheusListen) reads every user's metrics, without authentication")
        }
        if case .file(let path)? = c.token, let warning = TokenSource.permissionWarning(path) {
            warnings.append(warning)
        }
        return warnings
    }
}
