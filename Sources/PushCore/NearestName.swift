/// The closest of a list of names to a word someone typed (an option, a reason), for "did you
/// mean ...?" hints: by edit distance, ignoring case, and only when close enough to be a slip.
public enum NearestName {
    /// The candidate nearest to `word`, if one is within a third of its length (at least 2 edits).
    public static func suggest(_ word: String, in candidates: [String]) -> String? {
        let w = Array(word.lowercased().utf8)
        guard !w.isEmpty, w.count <= 200 else { return nil }
        var best: (String, Int)?
        for c in candidates {
            let d = distance(w, Array(c.lowercased().utf8))
            if d < (best?.1 ?? Int.max) { best = (c, d) }
        }
        guard let (name, d) = best, d > 0 || word != name, d <= max(2, w.count / 3) else { return nil }
        return name
    }

    /// Levenshtein distance (inserts, deletes, substitutions), two rows.
    static func distance(_ a: [UInt8], _ b: [UInt8]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                current[j] = Swift.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}
