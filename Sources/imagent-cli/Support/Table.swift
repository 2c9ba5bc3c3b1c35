/// A plain-text table with left-aligned columns, for `sessions`.
struct Table {
    var headers: [String]
    var rows: [[String]] = []

    var lines: [String] {
        let widths = headers.indices.map { column in
            ([headers[column]] + rows.map { column < $0.count ? $0[column] : "" }).map(\.count).max() ?? 0
        }
        func render(_ cells: [String]) -> String {
            var line = ""
            for (column, width) in widths.enumerated() {
                let cell = column < cells.count ? cells[column] : ""
                line += column == widths.count - 1 ? cell : cell + String(repeating: " ", count: width - cell.count + 2)
            }
            // Cells beyond the headers (extra fields) follow the last column.
            if cells.count > widths.count { line += "  " + cells[widths.count...].joined(separator: " ") }
            while line.hasSuffix(" ") { line.removeLast() }
            return line
        }
        return [render(headers)] + rows.map(render)
    }
}
