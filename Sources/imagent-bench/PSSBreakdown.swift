/// A process's PSS by what it maps, from `/proc/PID/smaps`: its executable, each shared
/// library, and memory of its own (heap, stacks, anonymous mappings). The shared libraries'
/// share depends on how many other processes map them at the time.
struct PSSBreakdown: Equatable {
    /// kB per mapped file path; "" for anonymous memory and `[heap]`, `[stack]` and the like.
    var byPath: [String: Int] = [:]

    init(byPath: [String: Int]) {
        self.byPath = byPath
    }

    /// Sums the `Pss:` lines of `smaps` under the path of the mapping they follow.
    init(smaps: String) {
        var path = ""
        for line in smaps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if let first = fields.first, first.contains("-"), first.allSatisfy({ $0.isHexDigit || $0 == "-" }) {
                path = fields.count >= 6 && fields[5].hasPrefix("/") ? String(fields[5]) : ""
            } else if fields.first == "Pss:", fields.count >= 2, let kB = Int(fields[1]) {
                byPath[path, default: 0] += kB
            }
        }
    }

    /// kB of the executable at `executable`, of the other files (the shared libraries), of anonymous memory.
    func split(executable: String) -> (executable: Int, libraries: Int, anonymous: Int) {
        var result = (executable: 0, libraries: 0, anonymous: 0)
        for (path, kB) in byPath {
            if path.isEmpty { result.anonymous += kB } else if path == executable { result.executable += kB } else { result.libraries += kB }
        }
        return result
    }

    /// The `count` largest, largest first.
    func largest(_ count: Int) -> [(path: String, kB: Int)] {
        byPath.sorted { ($0.value, $1.key) > ($1.value, $0.key) }.prefix(count).map { ($0.key, $0.value) }
    }
}
