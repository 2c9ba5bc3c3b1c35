import IMLink
import NIOCore

// The record sets of the ops (`ipc.md` sections 4 and 5). Required records are
// plain properties, optional ones Optionals, so that a record's absence
// survives decoding and re-encoding.

extension IPCMessage {
    /// An op with no records of its own (STATUS, PING, OK, …). Whatever
    /// records it carries are a newer peer's, kept to re-encode them.
    public struct NoRecords: Hashable, Sendable {
        public var extensions: [TLVRecord]

        public init(extensions: [TLVRecord] = []) {
            self.extensions = extensions
        }
    }

    /// HELLO: the first frame on every connection.
    public struct Hello: Hashable, Sendable {
        public var ipcVersion: UInt8
        /// At most 128 bytes of UTF-8, for the daemon's logs only: the daemon
        /// trusts the kernel's peer credentials, not what a client says.
        public var clientName: String?
        public var extensions: [TLVRecord]

        public init(ipcVersion: UInt8 = 1, clientName: String? = nil, extensions: [TLVRecord] = []) {
            self.ipcVersion = ipcVersion
            self.clientName = clientName
            self.extensions = extensions
        }
    }

    /// WELCOME: the reply to HELLO.
    public struct Welcome: Hashable, Sendable {
        public var ipcVersion: UInt8
        public var daemonVersion: String
        /// The largest PAYLOAD the daemon accepts; frames may be up to 64 KiB longer.
        public var maxPayload: UInt32
        public var linkState: LinkStateValue
        public var extensions: [TLVRecord]

        public init(ipcVersion: UInt8 = 1, daemonVersion: String, maxPayload: UInt32, linkState: LinkStateValue,
                    extensions: [TLVRecord] = []) {
            self.ipcVersion = ipcVersion
            self.daemonVersion = daemonVersion
            self.maxPayload = maxPayload
            self.linkState = linkState
            self.extensions = extensions
        }
    }

    /// OPEN: creates a session (`session` absent or 0, `service` required) or
    /// attaches to an existing one.
    public struct Open: Hashable, Sendable {
        public var session: UInt64?
        /// 1–255 bytes of UTF-8; the parser requires it when a new session is asked for.
        public var service: String?
        /// Absent means `.normal`.
        public var priority: IPCPriority?
        /// Keep inbound messages while no client is attached; absent means true.
        public var durable: Bool?
        public var extensions: [TLVRecord]

        public init(session: UInt64? = nil, service: String? = nil, priority: IPCPriority? = nil, durable: Bool? = nil,
                    extensions: [TLVRecord] = []) {
            self.session = session
            self.service = service
            self.priority = priority
            self.durable = durable
            self.extensions = extensions
        }

        /// Whether the client asks for a new session rather than an existing one.
        public var createsSession: Bool { (session ?? 0) == 0 }
    }

    /// OPENED: the session's id and where its three sequences stand.
    public struct Opened: Hashable, Sendable {
        public var session: UInt64
        public var sessionState: SessionStateValue
        /// The highest outbound seq the daemon has accepted.
        public var sentSeq: UInt64
        /// The highest outbound seq the server has acknowledged.
        public var ackedSeq: UInt64
        /// The highest inbound seq a client has acknowledged: delivery resumes after it.
        public var deliveredSeq: UInt64
        public var extensions: [TLVRecord]

        public init(session: UInt64, sessionState: SessionStateValue, sentSeq: UInt64, ackedSeq: UInt64,
                    deliveredSeq: UInt64, extensions: [TLVRecord] = []) {
            self.session = session
            self.sessionState = sessionState
            self.sentSeq = sentSeq
            self.ackedSeq = ackedSeq
            self.deliveredSeq = deliveredSeq
            self.extensions = extensions
        }
    }

    /// CLOSE and DETACH: a request about one session and nothing else.
    public struct SessionTarget: Hashable, Sendable {
        public var session: UInt64
        public var extensions: [TLVRecord]

        public init(session: UInt64, extensions: [TLVRecord] = []) {
            self.session = session
            self.extensions = extensions
        }
    }

    /// SEND: one outbound message.
    public struct Send: Hashable, Sendable {
        public var session: UInt64
        public var payload: ByteBuffer
        /// How long the message may wait for the link; absent or 0 means forever.
        public var ttlMS: UInt32?
        public var extensions: [TLVRecord]

        public init(session: UInt64, payload: ByteBuffer, ttlMS: UInt32? = nil, extensions: [TLVRecord] = []) {
            self.session = session
            self.payload = payload
            self.ttlMS = ttlMS
            self.extensions = extensions
        }
    }

    /// ACK, ACCEPTED and ACKED: a position in one session's sequence.
    public struct SessionSeq: Hashable, Sendable {
        public var session: UInt64
        public var seq: UInt64
        public var extensions: [TLVRecord]

        public init(session: UInt64, seq: UInt64, extensions: [TLVRecord] = []) {
            self.session = session
            self.seq = seq
            self.extensions = extensions
        }
    }

    /// RESULT and EVENT: one UTF-8 JSON document. The codec checks only the
    /// UTF-8; the JSON is the business of whoever reads it.
    public struct JSONDocument: Hashable, Sendable {
        public var json: String
        public var extensions: [TLVRecord]

        public init(json: String, extensions: [TLVRecord] = []) {
            self.json = json
            self.extensions = extensions
        }
    }

    /// ERROR: why a request failed, or why the daemon closes the connection.
    public struct ErrorReply: Hashable, Sendable {
        public var code: IPCErrorCode
        public var message: String?
        public var extensions: [TLVRecord]

        public init(code: IPCErrorCode, message: String? = nil, extensions: [TLVRecord] = []) {
            self.code = code
            self.message = message
            self.extensions = extensions
        }
    }

    /// MESSAGE: inbound data for a session the client has open.
    public struct InboundMessage: Hashable, Sendable {
        public var session: UInt64
        public var seq: UInt64
        public var payload: ByteBuffer
        public var extensions: [TLVRecord]

        public init(session: UInt64, seq: UInt64, payload: ByteBuffer, extensions: [TLVRecord] = []) {
            self.session = session
            self.seq = seq
            self.payload = payload
            self.extensions = extensions
        }
    }

    /// EXPIRED: an outbound message was given up (its TTL ran out, or the
    /// server refused it).
    public struct Expired: Hashable, Sendable {
        public var session: UInt64
        public var seq: UInt64
        public var code: IPCErrorCode
        public var message: String?
        public var extensions: [TLVRecord]

        public init(session: UInt64, seq: UInt64, code: IPCErrorCode, message: String? = nil,
                    extensions: [TLVRecord] = []) {
            self.session = session
            self.seq = seq
            self.code = code
            self.message = message
            self.extensions = extensions
        }
    }

    /// SESSION_STATE: the session's state changed, with a reason when it failed.
    public struct SessionStateChange: Hashable, Sendable {
        public var session: UInt64
        public var state: SessionStateValue
        public var code: IPCErrorCode?
        public var message: String?
        public var extensions: [TLVRecord]

        public init(session: UInt64, state: SessionStateValue, code: IPCErrorCode? = nil, message: String? = nil,
                    extensions: [TLVRecord] = []) {
            self.session = session
            self.state = state
            self.code = code
            self.message = message
            self.extensions = extensions
        }
    }

    /// LINK_STATE: the upstream link's state changed.
    public struct LinkStateChange: Hashable, Sendable {
        public var state: LinkStateValue
        public var extensions: [TLVRecord]

        public init(state: LinkStateValue, extensions: [TLVRecord] = []) {
            self.state = state
            self.extensions = extensions
        }
    }
}
