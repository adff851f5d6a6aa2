import Foundation
import TestSupport
import XCTest

/// Every input of the fuzz corpus (`Tests/Fuzz/corpus`, the seeds and what fuzzing found,
/// crashes included once fixed) replayed through its target in the ordinary build: a parser
/// change that brings a finding back fails here, without libFuzzer.
final class FuzzCorpusTests: XCTestCase {
    func testEveryCorpusInputReplaysCleanly() throws {
        let binary = URL(fileURLWithPath: ServerProcess.binaryPath).deletingLastPathComponent().path + "/pushemu-fuzz"
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: binary), "pushemu-fuzz is not built beside \(binary)")
        for target in ["http1", "json", "fcm", "faults", "jwt", "h2"] {
            let corpus = ServerProcess.repositoryRoot + "/Tests/Fuzz/corpus/" + target
            let files = try FileManager.default.contentsOfDirectory(atPath: corpus)
            XCTAssertFalse(files.isEmpty, "a corpus for \(target)")
            let r = try runCommand(binary, [target, corpus], timeout: 120)
            XCTAssertEqual(r.status, 0, "\(target): \(r.stdout)\n\(r.stderr)")
            XCTAssertTrue(r.stdout.contains("\(target): \(files.count) inputs replayed"), r.stdout)
        }
    }
}
