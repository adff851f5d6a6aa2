import CCurlMemory
import Foundation
import XCTest

/// libcurl's per-thread allocator: aligned blocks that keep their contents, reuse of freed
/// blocks of the same class, a bound on what a thread keeps, blocks freed on another thread,
/// realloc, calloc and strdup as in C, and the lists released when a thread exits.
final class CurlMemoryTests: XCTestCase {
    override func setUp() { pushemu_curl_memory_release_thread() }
    override func tearDown() { pushemu_curl_memory_release_thread() }

    func testBlocksAreAlignedWritableAndReused() {
        var blocks: [UnsafeMutableRawPointer] = []
        for size in [0, 1, 32, 33, 200, 1000, 16_385, 32_768, 32_769, 100_000] {
            let p = pushemu_curl_malloc(size)!
            XCTAssertEqual(Int(bitPattern: p) % 16, 0, "size \(size)")
            memset(p, 0xAB, size)
            blocks.append(p)
        }
        XCTAssertEqual(pushemu_curl_memory_cached(), 0)
        for p in blocks { pushemu_curl_free(p) }
        // The class-sized blocks are kept (the two larger than 32 KiB are not); a request of the
        // same class gets the last freed block back.
        XCTAssertEqual(pushemu_curl_memory_cached(), 32 * 3 + 64 + 256 + 1024 + 32_768 * 2)
        let again = pushemu_curl_malloc(600)!
        XCTAssertEqual(again, blocks[5])
        XCTAssertEqual(pushemu_curl_memory_cached(), 32 * 3 + 64 + 256 + 32_768 * 2)
        pushemu_curl_free(again)
        pushemu_curl_free(nil)
    }

    func testWhatAThreadKeepsIsBounded() {
        let blocks = (0..<100).map { _ in pushemu_curl_malloc(30_000)! }
        for p in blocks { pushemu_curl_free(p) }
        XCTAssertLessThanOrEqual(pushemu_curl_memory_cached(), Int(PUSHEMU_CURL_CACHE_BYTES))
        XCTAssertEqual(pushemu_curl_memory_cached(), Int(PUSHEMU_CURL_CACHE_BYTES) / 32_768 * 32_768)
        pushemu_curl_memory_release_thread()
        XCTAssertEqual(pushemu_curl_memory_cached(), 0)
    }

    func testReallocCallocAndStrdup() {
        var p = pushemu_curl_realloc(nil, 10)!
        for i in 0..<10 { p.storeBytes(of: UInt8(i), toByteOffset: i, as: UInt8.self) }
        XCTAssertEqual(pushemu_curl_realloc(p, 30), p) // still fits its 32-byte class
        for n in [300, 5000, 70_000, 200_000, 100] {
            p = pushemu_curl_realloc(p, n)!
            for i in 0..<10 { XCTAssertEqual(p.load(fromByteOffset: i, as: UInt8.self), UInt8(i), "after realloc to \(n)") }
        }
        pushemu_curl_free(p)
        let z = pushemu_curl_calloc(100, 33)!
        XCTAssertTrue(UnsafeRawBufferPointer(start: z, count: 3300).allSatisfy { $0 == 0 })
        // A reused block comes back zeroed from calloc too.
        memset(z, 0xFF, 3300)
        pushemu_curl_free(z)
        let z2 = pushemu_curl_calloc(3300, 1)!
        XCTAssertEqual(z2, z)
        XCTAssertTrue(UnsafeRawBufferPointer(start: z2, count: 3300).allSatisfy { $0 == 0 })
        pushemu_curl_free(z2)
        XCTAssertNil(pushemu_curl_calloc(Int.max, 16)) // overflow
        XCTAssertNil(pushemu_curl_malloc(Int.max))
        let s = pushemu_curl_strdup("tracking lane")!
        XCTAssertEqual(String(cString: s), "tracking lane")
        pushemu_curl_free(s)
    }

    func testBlocksMoveBetweenThreadsAndExitingThreadsReleaseTheirLists() {
        let address = Int(bitPattern: pushemu_curl_malloc(500)!)
        final class Box: @unchecked Sendable {
            var cachedInThread = 0
            var reused = false
        }
        let box = Box()
        let before = pushemu_curl_memory_released_at_exit()
        let done = DispatchSemaphore(value: 0)
        Thread {
            // Freed here, the block joins this thread's lists and is what it gets back next.
            pushemu_curl_free(UnsafeMutableRawPointer(bitPattern: address))
            box.cachedInThread = pushemu_curl_memory_cached()
            let q = pushemu_curl_malloc(512)!
            box.reused = Int(bitPattern: q) == address
            pushemu_curl_free(q)
            for _ in 0..<10 { pushemu_curl_free(pushemu_curl_malloc(4000)) }
            done.signal()
        }.start()
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(box.cachedInThread, 512)
        XCTAssertTrue(box.reused)
        XCTAssertEqual(pushemu_curl_memory_cached(), 0, "nothing joined this thread's lists")
        // The exited thread handed its 512 + 4096 bytes back to malloc.
        let deadline = Date().addingTimeInterval(5)
        while pushemu_curl_memory_released_at_exit() - before < 512 + 4096 && Date() < deadline { usleep(1000) }
        XCTAssertEqual(pushemu_curl_memory_released_at_exit() - before, 512 + 4096)
    }
}
