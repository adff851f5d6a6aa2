import CCurl
import CCurlMemory

/// libcurl's process-wide initialisation, with the lanes' allocator (`curl_memory.h`): call it
/// before any other libcurl function; calls after the first do nothing.
public enum CurlGlobal {
    private static let once: Void = { _ = pushemu_curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()

    public static func initialize() { _ = once }
}
