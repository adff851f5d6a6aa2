/// The app an APNs topic belongs to: an app's other topics are its bundle id with a suffix
/// (`.voip`, `.complication`, ...), which the search, the event stream and the journal's index
/// all strip the same way.
public enum AppTopic {
    /// The app an `apns-topic`'s bytes name (the topic without an app-topic suffix).
    public static func bundle(ofTopic topic: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        for s in topicSuffixes where topic.count >= s.utf8.count && topic.suffix(s.utf8.count).elementsEqual(s.utf8) {
            return UnsafeRawBufferPointer(rebasing: topic[0..<(topic.count - s.utf8.count)])
        }
        return topic
    }

    /// The suffixes of an app's other `apns-topic`s.
    static let topicSuffixes = [".voip", ".complication", ".pushkit.fileprovider", ".push-type.liveactivity", ".location-query"]

    /// The app an `apns-topic` names.
    public static func bundle(ofTopic topic: String) -> String {
        for s in topicSuffixes where topic.hasSuffix(s) { return String(topic.dropLast(s.count)) }
        return topic
    }
}
