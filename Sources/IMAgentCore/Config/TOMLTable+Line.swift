import ConfigFile

extension TOMLTable {
    /// The line of the deepest key of `path` the file sets (`line("server", "tls", "ca_file")`),
    /// or 1 when it sets none of them: where a problem with a default value is reported.
    func line(_ path: String...) -> Int {
        var table = self
        var found = 1
        for key in path {
            guard let entry = table[key] else { break }
            found = entry.line
            guard case .table(let child) = entry.value else { break }
            table = child
        }
        return found
    }
}
