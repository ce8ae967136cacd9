package io.tierd.kafka;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A minimal JSON writer and reader for tierd's small request and answer bodies
 * (RFC 8259). The reader returns {@code Map<String, Object>} for objects,
 * {@code List<Object>} for arrays, {@code String}, {@code Long} for integers,
 * {@code Double} for other numbers, {@code Boolean} and {@code null}.
 */
final class Json {
    private Json() {
    }

    /** Builds one JSON object, names in the order they are added. */
    static final class ObjectWriter {
        private final StringBuilder sb = new StringBuilder("{");
        private boolean first = true;

        private ObjectWriter name(String name) {
            if (!first) {
                sb.append(',');
            }
            first = false;
            quote(sb, name);
            sb.append(':');
            return this;
        }

        /** Adds a string, or null. */
        ObjectWriter put(String name, String value) {
            name(name);
            if (value == null) {
                sb.append("null");
            } else {
                quote(sb, value);
            }
            return this;
        }

        /** Adds a number. */
        ObjectWriter put(String name, long value) {
            name(name).sb.append(value);
            return this;
        }

        /** Adds already-encoded JSON (an array or object made by this class). */
        ObjectWriter putRaw(String name, String json) {
            name(name).sb.append(json);
            return this;
        }

        /** @return the object's text */
        String end() {
            return sb.toString() + "}";
        }
    }

    /** Appends s as a JSON string, escaping what RFC 8259 requires. */
    static void quote(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
            }
        }
        sb.append('"');
    }

    /**
     * Parses one JSON value filling the whole text.
     *
     * @param text the JSON text
     * @return the value
     * @throws IllegalArgumentException on malformed JSON, naming the character position
     */
    static Object parse(String text) {
        Reader r = new Reader(text);
        r.ws();
        Object v = r.value(0);
        r.ws();
        if (r.pos != text.length()) {
            throw r.error("text after the value");
        }
        return v;
    }

    private static final class Reader {
        private static final int MAX_DEPTH = 64;
        private final String s;
        private int pos;

        Reader(String s) {
            this.s = s;
        }

        IllegalArgumentException error(String what) {
            return new IllegalArgumentException("malformed JSON at character " + pos + ": " + what);
        }

        void ws() {
            while (pos < s.length() && " \t\r\n".indexOf(s.charAt(pos)) >= 0) {
                pos++;
            }
        }

        char peek() {
            if (pos >= s.length()) {
                throw error("unexpected end");
            }
            return s.charAt(pos);
        }

        void expect(String word) {
            if (!s.startsWith(word, pos)) {
                throw error("expected " + word);
            }
            pos += word.length();
        }

        Object value(int depth) {
            if (depth > MAX_DEPTH) {
                throw error("nested too deep");
            }
            char c = peek();
            switch (c) {
                case '{': return object(depth);
                case '[': return array(depth);
                case '"': return string();
                case 't': expect("true"); return Boolean.TRUE;
                case 'f': expect("false"); return Boolean.FALSE;
                case 'n': expect("null"); return null;
                default:
                    if (c == '-' || (c >= '0' && c <= '9')) {
                        return number();
                    }
                    throw error("unexpected character '" + c + "'");
            }
        }

        Map<String, Object> object(int depth) {
            Map<String, Object> m = new LinkedHashMap<>();
            pos++;
            ws();
            if (peek() == '}') {
                pos++;
                return m;
            }
            while (true) {
                ws();
                if (peek() != '"') {
                    throw error("expected a name");
                }
                String k = string();
                ws();
                expect(":");
                ws();
                m.put(k, value(depth + 1));
                ws();
                char c = peek();
                pos++;
                if (c == '}') {
                    return m;
                }
                if (c != ',') {
                    throw error("expected ',' or '}'");
                }
            }
        }

        List<Object> array(int depth) {
            List<Object> l = new ArrayList<>();
            pos++;
            ws();
            if (peek() == ']') {
                pos++;
                return l;
            }
            while (true) {
                ws();
                l.add(value(depth + 1));
                ws();
                char c = peek();
                pos++;
                if (c == ']') {
                    return l;
                }
                if (c != ',') {
                    throw error("expected ',' or ']'");
                }
            }
        }

        String string() {
            StringBuilder sb = new StringBuilder();
            pos++;
            while (true) {
                char c = peek();
                pos++;
                if (c == '"') {
                    return sb.toString();
                }
                if (c < 0x20) {
                    throw error("control character in a string");
                }
                if (c != '\\') {
                    sb.append(c);
                    continue;
                }
                char e = peek();
                pos++;
                switch (e) {
                    case '"': sb.append('"'); break;
                    case '\\': sb.append('\\'); break;
                    case '/': sb.append('/'); break;
                    case 'b': sb.append('\b'); break;
                    case 'f': sb.append('\f'); break;
                    case 'n': sb.append('\n'); break;
                    case 'r': sb.append('\r'); break;
                    case 't': sb.append('\t'); break;
                    case 'u':
                        if (pos + 4 > s.length()) {
                            throw error("short \\u escape");
                        }
                        try {
                            sb.append((char) Integer.parseInt(s.substring(pos, pos + 4), 16));
                        } catch (NumberFormatException ex) {
                            throw error("bad \\u escape");
                        }
                        pos += 4;
                        break;
                    default:
                        throw error("bad escape \\" + e);
                }
            }
        }

        Object number() {
            int start = pos;
            while (pos < s.length() && "+-0123456789.eE".indexOf(s.charAt(pos)) >= 0) {
                pos++;
            }
            String n = s.substring(start, pos);
            try {
                if (n.indexOf('.') < 0 && n.indexOf('e') < 0 && n.indexOf('E') < 0) {
                    return Long.parseLong(n);
                }
                return Double.parseDouble(n);
            } catch (NumberFormatException ex) {
                pos = start;
                throw error("bad number " + n);
            }
        }
    }
}
