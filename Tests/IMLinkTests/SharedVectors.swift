import Foundation
import NIOCore

/// The byte-exact vectors in `../shared/vectors/imlink.json`, read at test time.
struct IMLinkVectors {
    struct Valid {
        var name: String
        var bytes: [UInt8]
        var type: String
        var session: UInt64
        var seq: UInt64
        var flags: UInt16
        /// Spec field name → value as text (numbers in decimal, TOKEN in hex).
        var fields: [String: String]
        var payloadHex: String?
    }

    struct Invalid {
        var name: String
        var bytes: [UInt8]
        var error: String
    }

    var crcCheckInput: String
    var crcCheckValue: UInt32
    var valid: [Valid]
    var invalid: [Invalid]

    static let shared: IMLinkVectors = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let file = root.deletingLastPathComponent().appendingPathComponent("shared/vectors/imlink.json")
        guard let data = try? Data(contentsOf: file),
              let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { fatalError("cannot read \(file.path): the shared folder must sit beside the project root") }
        return IMLinkVectors(json: json)
    }()

    private init(json: [String: Any]) {
        let check = json["crc32c_check"] as! [String: Any]
        crcCheckInput = check["input_ascii"] as! String
        crcCheckValue = UInt32(check["crc"] as! String, radix: 16)!
        valid = (json["valid"] as! [[String: Any]]).map { entry in
            let decoded = entry["decoded"] as! [String: Any]
            let fields = (decoded["fields"] as? [String: Any] ?? [:]).mapValues { value in
                if let number = value as? NSNumber { return number.stringValue }
                return value as! String
            }
            return Valid(
                name: entry["name"] as! String,
                bytes: hexBytes(entry["hex"] as! String),
                type: decoded["type"] as! String,
                session: (decoded["session"] as! NSNumber).uint64Value,
                seq: (decoded["seq"] as! NSNumber).uint64Value,
                flags: (decoded["flags"] as? NSNumber)?.uint16Value ?? 0,
                fields: fields,
                payloadHex: decoded["payload_hex"] as? String)
        }
        invalid = (json["invalid"] as! [[String: Any]]).map { entry in
            Invalid(name: entry["name"] as! String, bytes: hexBytes(entry["hex"] as! String), error: entry["error"] as! String)
        }
    }
}

func hexBytes(_ hex: String) -> [UInt8] {
    var bytes: [UInt8] = []
    bytes.reserveCapacity(hex.utf8.count / 2)
    var index = hex.startIndex
    while index < hex.endIndex {
        let next = hex.index(index, offsetBy: 2)
        bytes.append(UInt8(hex[index..<next], radix: 16)!)
        index = next
    }
    return bytes
}

func hexString(_ buffer: ByteBuffer) -> String {
    buffer.readableBytesView.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
}
