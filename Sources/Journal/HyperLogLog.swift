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

    /// Empty until the first value (a digest of a campaign that never named a device costs nothing).
    private(set) var registers: [UInt8] = []

    var isEmpty: Bool { registers.isEmpty }

    mutating func add(_ hash: UInt64) {
        if registers.isEmpty { registers = [UInt8](repeating: 0, count: HyperLogLog.registerCount) }
        let index = Int(hash >> UInt64(64 - HyperLogLog.precision))
        let rest = hash << UInt64(HyperLogLog.precision) | 1 << UInt64(HyperLogLog.precision - 1)
        let rank = UInt8(rest.leadingZeroBitCount + 1)
        registers.withUnsafeMutableBufferPointer { r in if r[index] < rank { r[index] = rank } }
    }

    mutating func merge(_ o: HyperLogLog) {
        guard !o.registers.isEmpty else { return }
        guard !registers.isEmpty else {
            registers = o.registers
            return
        }
        registers.withUnsafeMutableBufferPointer { r in
            o.registers.withUnsafeBufferPointer { s in
                for i in 0..<HyperLogLog.registerCount { r[i] = Swift.max(r[i], s[i]) }
            }
        }
    }

    /// The estimated count of distinct values added.
    var estimate: Int {
        guard !registers.isEmpty else { return 0 }
        let m = Double(HyperLogLog.registerCount)
        var sum = 0.0
        var zeros = 0
        for r in registers {
            sum += 1 / Double(UInt64(1) << UInt64(r))
            if r == 0 { zeros += 1 }
        }
        let raw = 0.7213 / (1 + 1.079 / m) * m * m / sum
        if raw <= 2.5 * m, zeros > 0 { return Int((m * log(m / Double(zeros))).rounded()) }
        return Int(raw.rounded())
    }

    // MARK: stored form: a flag byte, then nothing (empty), the registers whole (dense), or
    // (index delta, rank) pairs for the registers set (sparse, when shorter).

    func write(_ out: inout [UInt8]) {
        guard !registers.isEmpty else {
            out.append(0)
            return
        }
        let set = registers.reduce(0) { $0 + ($1 == 0 ? 0 : 1) }
        if set * 3 < HyperLogLog.registerCount {
            out.append(2)
            SummaryBytes.varint(UInt64(set), &out)
            var last = 0
            for (i, r) in registers.enumerated() where r != 0 {
                SummaryBytes.varint(UInt64(i - last), &out)
                out.append(r)
                last = i
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
            h.registers = [UInt8](repeating: 0, count: registerCount)
            for i in 0..<registerCount {
                guard let b = r.byte(), b <= 64 else { return nil }
                h.registers[i] = b
            }
            return h
        case 2:
            let n = r.varint()
            guard !r.failed, n <= UInt64(registerCount) else { return nil }
            h.registers = [UInt8](repeating: 0, count: registerCount)
            var at = 0
            for _ in 0..<n {
                let d = r.varint()
                guard !r.failed, d < UInt64(registerCount), at + Int(d) < registerCount, let b = r.byte(), b <= 64 else { return nil }
                at += Int(d)
                h.registers[at] = b
            }
            return h
        default: return nil
        }
    }
}
