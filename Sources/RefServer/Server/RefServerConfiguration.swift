import IMLink
import NIOCore

/// Everything a reference server is started with. The defaults are the
/// command line's defaults.
public struct RefServerConfiguration: Sendable {
    /// Certificate and key files (PEM) for TLS with ALPN `imlink/1`.
    public struct TLS: Sendable, Hashable {
        public var certificatePath: String
        public var privateKeyPath: String

        public init(certificatePath: String, privateKeyPath: String) {
            self.certificatePath = certificatePath
            self.privateKeyPath = privateKeyPath
        }
    }

    /// The stream a `push` session receives when it is created.
    public struct Push: Sendable, Hashable {
        public var count: Int
        /// Payload bytes per message.
        public var size: Int
        /// Messages per second; 0 sends them all at once.
        public var rate: Int

        public init(count: Int = 10, size: Int = 64, rate: Int = 10) {
            self.count = count
            self.size = size
            self.rate = rate
        }
    }

    public var host: String
    /// 0 picks a free port; `RefServer.port` tells which.
    public var port: Int
    /// Each non-empty line is an accepted token; read anew at every LOGIN.
    public var tokenFile: String
    /// SQLite file for durable state; nil keeps state in memory only.
    public var statePath: String?
    /// HEARTBEAT_MS sent in LOGIN_OK.
    public var heartbeatMS: UInt32
    /// MAX_FRAME announced in HELLO_OK, and the inbound limit after it.
    public var maxFrame: UInt32
    /// WINDOW announced in OPEN_OK.
    public var receiveWindow: UInt32
    public var tls: TLS?
    /// Unix socket path for admin commands; nil for none.
    public var adminSocketPath: String?
    public var push: Push
    /// Close connections that sent nothing for 3 × their HEARTBEAT_MS (`wire.md` section 7).
    public var closeIdleConnections: Bool
    /// How long connections may finish after the `goaway` command before they are closed.
    public var goawayGrace: TimeAmount
    /// How long a black-holed connection (`nat-timeout`) lingers before its socket is closed silently.
    public var blackHoleLinger: TimeAmount

    public init(host: String = "127.0.0.1", port: Int = 0, tokenFile: String, statePath: String? = nil,
                heartbeatMS: UInt32 = 30_000, maxFrame: UInt32 = FrameHeader.defaultMaxBody,
                receiveWindow: UInt32 = 1024, tls: TLS? = nil, adminSocketPath: String? = nil, push: Push = Push(),
                closeIdleConnections: Bool = true, goawayGrace: TimeAmount = .milliseconds(200),
                blackHoleLinger: TimeAmount = .seconds(60)) {
        self.host = host
        self.port = port
        self.tokenFile = tokenFile
        self.statePath = statePath
        self.heartbeatMS = heartbeatMS
        self.maxFrame = maxFrame
        self.receiveWindow = receiveWindow
        self.tls = tls
        self.adminSocketPath = adminSocketPath
        self.push = push
        self.closeIdleConnections = closeIdleConnections
        self.goawayGrace = goawayGrace
        self.blackHoleLinger = blackHoleLinger
    }

    /// Why the configuration cannot be used, or nil when it can.
    public var problem: String? {
        if maxFrame > FrameHeader.maxNegotiableBody {
            return "max frame \(maxFrame) is above the protocol's limit of \(FrameHeader.maxNegotiableBody) bytes"
        }
        if maxFrame < 1024 { return "max frame \(maxFrame) is below 1024 bytes, too small for control frames" }
        if !(0...65535).contains(port) { return "port \(port) is outside 0–65535" }
        if heartbeatMS == 0 { return "heartbeat must be at least 1 ms" }
        if push.count < 0 || push.size < 0 || push.rate < 0 { return "push count, size and rate must not be negative" }
        return nil
    }
}
