/// Text made safe inside HTML or XML markup, as element content or a quoted attribute value:
/// `&`, `<`, `>` and `"` escaped, and `'` too where the attribute may be single-quoted (XML).
public enum MarkupEscaping {
    public static func escape(_ s: String, apostrophe: Bool = false) -> String {
        var out = ""
        for c in s {
            switch c {
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "&": out += "&amp;"
            case "\"": out += "&quot;"
            case "'" where apostrophe: out += "&apos;"
            default: out.append(c)
            }
        }
        return out
    }
}
