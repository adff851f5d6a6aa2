import Glibc

/// Starting a dedicated thread (event loops, tracking lanes, the journal writer).
public enum Threads {
    private final class Body {
        let run: () -> Void
        init(_ run: @escaping () -> Void) { self.run = run }
    }

    /// Runs `body` on a new thread; join it with `pthread_join`.
    public static func spawn(_ body: @escaping () -> Void) -> pthread_t {
        let box = Unmanaged.passRetained(Body(body))
        var tid = pthread_t()
        let rc = pthread_create(
            &tid, nil,
            { arg in
                Unmanaged<Body>.fromOpaque(arg!).takeRetainedValue().run()
                return nil
            }, box.toOpaque())
        precondition(rc == 0, "pthread_create failed")
        return tid
    }
}
