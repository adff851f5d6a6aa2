import CH2Memory
import CNghttp2
import XCTest

/// The per-session nghttp2 allocator: aligned blocks that keep their contents, reuse of freed
/// blocks of the same class, a bound on what the free lists keep, realloc and calloc as in C.
final class H2MemoryTests: XCTestCase {
    private func withAllocator(_ body: (UnsafeMutablePointer<nghttp2_mem>, OpaquePointer) -> Void) {
        let m = pushemu_h2_memory_new()!
        body(pushemu_h2_memory_mem(m), m)
        pushemu_h2_memory_free(m)
    }

    func testBlocksAreAlignedWritableAndReused() {
        withAllocator { mem, m in
            let ud = mem.pointee.mem_user_data
            var blocks: [UnsafeMutableRawPointer] = []
            for size in [1, 63, 64, 65, 200, 1000, 4096, 4097, 100_000] {
                let p = mem.pointee.malloc(size, ud)!
                XCTAssertEqual(Int(bitPattern: p) % 16, 0, "size \(size)")
                memset(p, 0xAB, size)
                blocks.append(p)
            }
            for p in blocks { mem.pointee.free(p, ud) }
            // The class-sized blocks are cached (the two large ones are not); the same class
            // gives the last freed block back.
            XCTAssertEqual(pushemu_h2_memory_cached(m), 64 * 3 + 128 + 256 + 1024 + 4096)
            let again = mem.pointee.malloc(900, ud)!
            XCTAssertEqual(again, blocks[5])
            XCTAssertEqual(pushemu_h2_memory_cached(m), 64 * 3 + 128 + 256 + 4096)
            mem.pointee.free(again, ud)
            mem.pointee.free(nil, ud)
        }
    }

    func testCacheIsBounded() {
        withAllocator { mem, m in
            let ud = mem.pointee.mem_user_data
            let blocks = (0..<100).map { _ in mem.pointee.malloc(4000, ud)! }
            for p in blocks { mem.pointee.free(p, ud) }
            XCTAssertLessThanOrEqual(pushemu_h2_memory_cached(m), Int(PUSHEMU_H2_CACHE_BYTES))
            XCTAssertGreaterThan(pushemu_h2_memory_cached(m), 0)
        }
    }

    func testReallocKeepsContentsAndCallocZeroes() {
        withAllocator { mem, _ in
            let ud = mem.pointee.mem_user_data
            var p = mem.pointee.realloc(nil, 10, ud)!
            for i in 0..<10 { p.storeBytes(of: UInt8(i), toByteOffset: i, as: UInt8.self) }
            XCTAssertEqual(mem.pointee.realloc(p, 60, ud), p) // still fits its 64-byte class
            for n in [300, 5000, 70_000, 200] {
                p = mem.pointee.realloc(p, n, ud)!
                for i in 0..<10 { XCTAssertEqual(p.load(fromByteOffset: i, as: UInt8.self), UInt8(i), "after realloc to \(n)") }
            }
            XCTAssertNil(mem.pointee.realloc(p, 0, ud)) // frees, as C's realloc may
            let z = mem.pointee.calloc(100, 33, ud)!
            XCTAssertTrue(UnsafeRawBufferPointer(start: z, count: 3300).allSatisfy { $0 == 0 })
            mem.pointee.free(z, ud)
            XCTAssertNil(mem.pointee.calloc(Int.max, 16, ud)) // overflow
        }
    }
}
