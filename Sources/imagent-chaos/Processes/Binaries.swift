import IMAgentTestKit

/// Where the programs come from: the kit's build directory, plus this executable
/// (the delay proxy runs as `imagent-chaos proxy`).
typealias Binaries = BuiltPrograms

extension BuiltPrograms {
    static var chaos: String { path("imagent-chaos") }
}
