import Glibc

/// Distinct values counted in 4,096 one-byte registers (HyperLogLog, precision 12): a standard
/// error of 1.04/sqrt(4096), about 1.6%, and near-exact counts below a few thousand (linear
/// counting). Mergeable by taking each register's maximum: a campaign's unique devices over any
/// number of journal blocks. Values are 64-bit hashes.
struct HyperLogLog: Sendable, Equatable {
    static let precision = 12
    static let registerCount = 1 << precision
    /// The estimate's relative standard error, as the report states it.
    static let standardError = 1.04 / Double(registerCount).squareRoot()

    /// Dense registers once more than `sparseLimit` are set; empty before.
    private(set) var registers: [UInt8] = []
    /// Until then, the registers set, as `index << 8 | rank`, sorted by index (a campaign with
    /// few devices in a block costs a few bytes, not 4 KiB).
    private var sparse: [UInt32] = []
    static let sparseLimit = 512

    var isEmpty: Bool { registers.isEmpty && sparse.isEmpty }

    static func split(_ hash: UInt64) -> (index: Int, rank: UInt8) {
        let index = Int(hash >> UInt64(64 - HyperLogLog.precision))
        let rest = hash << UInt64(HyperLogLog.precision) | 1 << UInt64(HyperLogLog.precision - 1)
        return (index, UInt8(rest.leadingZeroBitCount + 1))
    }

    mutating func add(_ hash: UInt64) {
        let (index, rank) = HyperLogLog.split(hash)
        if registers.isEmpty {
            setSparse(index, rank)
            return
        }
        registers.withUnsafeMutableBufferPointer { r in if r[index] < rank { r[index] = rank } }
    }

    private mutating func setSparse(_ index: Int, _ rank: UInt8) {
        var lo = 0
        var hi = sparse.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if Int(sparse[mid] >> 8) < index { lo = mid + 1 } else { hi = mid }
        }
        if lo < sparse.count, Int(sparse[lo] >> 8) == index {
            if UInt8(sparse[lo] & 0xFF) < rank { sparse[lo] = UInt32(index) << 8 | UInt32(rank) }
            return
        }
        sparse.insert(UInt32(index) << 8 | UInt32(rank), at: lo)
        if sparse.count > HyperLogLog.sparseLimit { densify() }
    }

    private mutating func densify() {
        guard registers.isEmpty else { return }
        registers = [UInt8](repeating: 0, count: HyperLogLog.registerCount)
        for e in sparse { registers[Int(e >> 8)] = UInt8(e & 0xFF) }
        sparse = []
    }

    mutating func merge(_ o: HyperLogLog) {
        if o.registers.isEmpty {
            for e in o.sparse { registers.isEmpty ? setSparse(Int(e >> 8), UInt8(e & 0xFF)) : maxRegister(Int(e >> 8), UInt8(e & 0xFF)) }
            return
        }
        densify()
        registers.withUnsafeMutableBufferPointer { r in
            o.registers.withUnsafeBufferPointer { s in
                for i in 0..<HyperLogLog.registerCount { r[i] = Swift.max(r[i], s[i]) }
            }
        }
    }

    private mutating func maxRegister(_ index: Int, _ rank: UInt8) {
        if registers[index] < rank { registers[index] = rank }
    }

    static func == (a: HyperLogLog, b: HyperLogLog) -> Bool { a.dense == b.dense }

    /// The registers as 4,096 bytes (empty when nothing was added).
    var dense: [UInt8] {
        guard registers.isEmpty else { return registers }
        guard !sparse.isEmpty else { return [] }
        var r = [UInt8](repeating: 0, count: HyperLogLog.registerCount)
        for e in sparse { r[Int(e >> 8)] = UInt8(e & 0xFF) }
        return r
    }

    /// The estimated count of distinct values added.
    var estimate: Int {
        guard !isEmpty else { return 0 }
        let m = Double(HyperLogLog.registerCount)
        var sum = 0.0
        var zeros = 0
        if registers.isEmpty {
            zeros = HyperLogLog.registerCount - sparse.count
            sum = Double(zeros)
            for e in sparse { sum += 1 / Double(UInt64(1) << UInt64(e & 0xFF)) }
        } else {
            for r in registers {
                sum += 1 / Double(UInt64(1) << UInt64(r))
                if r == 0 { zeros += 1 }
            }
        }
        let raw = 0.7213 / (1 + 1.079 / m) * m * m / sum
        if raw <= 2.5 * m, zeros > 0 { return Int((m * log(m / Double(zeros))).rounded()) }
        return Int(raw.rounded())
    }

    // MARK: stored form: a flag byte, then nothing (empty), the registers whole (dense), or
    // (index delta, rank) pairs for the registers set (sparse, when shorter).

    func write(_ out: inout [UInt8]) {
        guard !isEmpty else {
            out.append(0)
            return
        }
        if registers.isEmpty {
            out.append(2)
            SummaryBytes.varint(UInt64(sparse.count), &out)
            var last = 0
            for e in sparse {
                SummaryBytes.varint(UInt64(Int(e >> 8) - last), &out)
                out.append(UInt8(e & 0xFF))
                last = Int(e >> 8)
            }
        } else {
            out.append(1)
            out.append(contentsOf: registers)
        }
    }

    static func read(_ r: inout SummaryBytes.Reader) -> HyperLogLog? {
        var h = HyperLogLog()
        guard let kind = r.byte() else { return nil }
        switch kind {
        case 0: return h
        case 1:
            var regs = [UInt8](repeating: 0, count: registerCount)
            for i in 0..<registerCount {
                guard let b = r.byte(), b <= 64 else { return nil }
                regs[i] = b
            }
            h.registers = regs
            return h
        case 2:
            let n = r.varint()
            guard !r.failed, n <= UInt64(registerCount) else { return nil }
            var at = 0
            for k in 0..<n {
                let d = r.varint()
                guard !r.failed, d < UInt64(registerCount), at + Int(d) < registerCount, k == 0 || d > 0, let b = r.byte(), b >= 1, b <= 64
                else { return nil }
                at += Int(d)
                h.setSparse(at, b)
            }
            return h
        default: return nil
        }
    }
}
