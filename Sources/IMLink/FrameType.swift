/// The frame types of IMLink/1 (`wire.md` section 3).
public enum FrameType: UInt8, Sendable, CaseIterable {
    case hello = 0x01
    case helloOK = 0x02
    case login = 0x03
    case loginOK = 0x04
    case loginFail = 0x05
    case ping = 0x06
    case pong = 0x07
    case goaway = 0x08
    case error = 0x09
    case open = 0x10
    case openOK = 0x11
    case openFail = 0x12
    case close = 0x13
    case data = 0x20
    case ack = 0x21
    case window = 0x22

    /// The name used in the specification, for logs and errors.
    public var name: String {
        switch self {
        case .hello: "HELLO"
        case .helloOK: "HELLO_OK"
        case .login: "LOGIN"
        case .loginOK: "LOGIN_OK"
        case .loginFail: "LOGIN_FAIL"
        case .ping: "PING"
        case .pong: "PONG"
        case .goaway: "GOAWAY"
        case .error: "ERROR"
        case .open: "OPEN"
        case .openOK: "OPEN_OK"
        case .openFail: "OPEN_FAIL"
        case .close: "CLOSE"
        case .data: "DATA"
        case .ack: "ACK"
        case .window: "WINDOW"
        }
    }

    /// Which header `session` values the type allows.
    enum SessionRule { case zero, nonZero, any }

    var sessionRule: SessionRule {
        switch self {
        case .hello, .helloOK, .login, .loginOK, .loginFail, .ping, .pong, .goaway: .zero
        case .error: .any
        case .open, .openOK, .openFail, .close, .data, .ack, .window: .nonZero
        }
    }

    /// Legal before `LOGIN_OK` (`wire.md` section 4). Everything is legal after it.
    public var isLegalBeforeLogin: Bool {
        switch self {
        case .hello, .helloOK, .login, .loginOK, .loginFail, .error, .ping, .pong, .goaway: true
        case .open, .openOK, .openFail, .close, .data, .ack, .window: false
        }
    }
}
