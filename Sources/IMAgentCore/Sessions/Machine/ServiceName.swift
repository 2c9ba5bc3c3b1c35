import MQTT5

/// The one rule for SERVICE (imagent-ipc(7)): a name that can be one level of an
/// MQTT topic that every conforming broker accepts (`SessionTopics.checkService`:
/// no `/`, `+`, `#`, control character or noncharacter). It holds whatever the
/// upstream, so a name that works over IMLink works over MQTT too, and a session
/// moved to a broker by a reload cannot make it drop the link for everyone.
enum ServiceName {
    /// Why `service` cannot name a session; nil when it can.
    static func refusal(_ service: String) -> String? {
        do {
            try SessionTopics.checkService(service)
            return nil
        } catch {
            switch error {
            case .unusable(_, _, let reason):
                return "SERVICE \"\(RefusableCodePoints.escaped(service))\" is refused: \(reason) (see SERVICE in imagent-ipc(7))"
            }
        }
    }
}
