/// A small HTTP/1.1 client for tests: one request per call on a fresh connection, the answer
/// read by its `content-length` (or to the connection's end).
package enum HTTP1Client {
    package static func send(_ request: TestRequest, port: Int) throws -> TestResponse {
        let socket = try TestSocket(port: port)
        var head = "\(request.method) \(request.path) HTTP/1.1\r\nhost: 127.0.0.1:\(port)\r\nconnection: close\r\n"
        for (name, value) in request.headers { head += "\(name): \(value)\r\n" }
        if !request.body.isEmpty || ["POST", "PUT", "PATCH"].contains(request.method) {
            head += "content-length: \(request.body.count)\r\n"
        }
        try socket.send(Array((head + "\r\n").utf8) + request.body)
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        var headEnd: Int?
        var expected: Int?
        while received.count < 64 << 20 {
            if let end = headEnd, let length = expected, received.count >= end + length { break }
            let count = try socket.receive(into: &buffer)
            if count == 0 { break }
            received.append(contentsOf: buffer[0..<count])
            if headEnd == nil, let end = HTTP1Client.endOfHead(received) {
                headEnd = end
                expected = HTTP1Client.parseHead(received[0..<end]).contentLength
            }
        }
        guard let end = headEnd else { throw TestClientError("no HTTP/1.1 response head") }
        let parsed = HTTP1Client.parseHead(received[0..<end])
        let body = Array(received[end...].prefix(parsed.contentLength ?? Int.max))
        return TestResponse(status: parsed.status, headers: parsed.headers, body: body)
    }

    static func endOfHead(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4)
        where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index + 4
        }
        return nil
    }

    static func parseHead(_ bytes: ArraySlice<UInt8>) -> (status: Int, headers: [(String, String)], contentLength: Int?) {
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\r\n")
        let status = lines.first.flatMap { line in line.split(separator: " ").dropFirst().first.flatMap { Int($0) } } ?? 0
        var headers: [(String, String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.append((line[..<colon].lowercased(), String(line[line.index(after: colon)...].drop { $0 == " " })))
        }
        return (status, headers, headers.first { $0.0 == "content-length" }.flatMap { Int($0.1) })
    }
}
