package io.tierd.kafka;

import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * The plugin's settings, from the map the broker passes to {@code configure}:
 * its {@code rsm.config.*} properties with that prefix stripped (values the raw
 * property text, usually Strings) plus {@code broker.id} as an Integer
 * (Kafka's RemoteLogManager.configureRSM). Every key of ours starts with
 * {@code tierd.}; an unknown {@code tierd.*} key is an error (a typo would
 * otherwise go unnoticed), other keys are ignored. Immutable.
 */
final class Settings {
    /** Base URL of tierd's RSM endpoint, http:// or https://. */
    static final String ENDPOINT = "tierd.endpoint";
    /** File holding the bearer token; required. */
    static final String TOKEN_FILE = "tierd.token.file";
    /** PEM file of the CAs to trust for an https endpoint. */
    static final String TLS_CA_FILE = "tierd.tls.ca.file";
    /** Timeout of a read, index fetch or delete, ms. */
    static final String REQUEST_TIMEOUT_MS = "tierd.request.timeout.ms";
    /** Timeout of a copy, ms; at least tierd's rsm.copy_timeout. */
    static final String COPY_TIMEOUT_MS = "tierd.copy.timeout.ms";
    /** Timeout of opening a connection, ms. */
    static final String CONNECT_TIMEOUT_MS = "tierd.connect.timeout.ms";
    /** First ranged read of a fetchLogSegment stream, bytes. */
    static final String FETCH_WINDOW_BYTES = "tierd.fetch.window.bytes";
    /** Largest ranged read, bytes; the window doubles up to it. */
    static final String FETCH_WINDOW_MAX_BYTES = "tierd.fetch.window.max.bytes";
    /** Comma-separated brokerPrefix=sidecarPrefix path rewrites. */
    static final String PATH_MAP = "tierd.path.map";
    /** "path" (tierd reads the broker's files) or "upload" (the plugin sends their bytes). */
    static final String COPY_MODE = "tierd.copy.mode";
    /** Added by the broker: its id. */
    static final String BROKER_ID = "broker.id";

    static final String DEFAULT_ENDPOINT = "http://127.0.0.1:7452";
    static final int DEFAULT_REQUEST_TIMEOUT_MS = 30_000;
    static final int DEFAULT_COPY_TIMEOUT_MS = 600_000;
    static final int DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
    static final int DEFAULT_FETCH_WINDOW_BYTES = 1 << 20;
    static final int DEFAULT_FETCH_WINDOW_MAX_BYTES = 8 << 20;
    /** Upper bound of either window setting, bytes (a window is one byte array). */
    static final int MAX_WINDOW_BYTES = 256 << 20;

    private static final Set<String> KEYS = Collections.unmodifiableSet(new HashSet<>(Arrays.asList(
            ENDPOINT, TOKEN_FILE, TLS_CA_FILE, REQUEST_TIMEOUT_MS, COPY_TIMEOUT_MS, CONNECT_TIMEOUT_MS,
            FETCH_WINDOW_BYTES, FETCH_WINDOW_MAX_BYTES, PATH_MAP, COPY_MODE)));

    /** How a copy hands the segment's files to tierd (rsmapi/doc.go, "Copy"). */
    enum CopyMode {
        /** tierd opens the broker's files by path. */
        PATH,
        /** The plugin sends the files' bytes in the request body. */
        UPLOAD
    }

    final URI endpoint;
    /** The bearer token's file, read once here; null only while parse reports a problem. */
    final TokenFile token;
    final Path tlsCaFile;
    final Duration requestTimeout;
    final Duration copyTimeout;
    final Duration connectTimeout;
    final int fetchWindowBytes;
    final int fetchWindowMaxBytes;
    final PathMap pathMap;
    final CopyMode copyMode;
    /** The broker's id, or null when the map had none. */
    final Integer brokerId;

    private Settings(Parser p) {
        endpoint = p.endpoint();
        token = p.tokenFile();
        tlsCaFile = p.caFile(endpoint);
        requestTimeout = Duration.ofMillis(p.positiveInt(REQUEST_TIMEOUT_MS, DEFAULT_REQUEST_TIMEOUT_MS, Integer.MAX_VALUE));
        copyTimeout = Duration.ofMillis(p.positiveInt(COPY_TIMEOUT_MS, DEFAULT_COPY_TIMEOUT_MS, Integer.MAX_VALUE));
        connectTimeout = Duration.ofMillis(p.positiveInt(CONNECT_TIMEOUT_MS, DEFAULT_CONNECT_TIMEOUT_MS, Integer.MAX_VALUE));
        fetchWindowBytes = p.positiveInt(FETCH_WINDOW_BYTES, DEFAULT_FETCH_WINDOW_BYTES, MAX_WINDOW_BYTES);
        int max = p.positiveInt(FETCH_WINDOW_MAX_BYTES, Math.max(DEFAULT_FETCH_WINDOW_MAX_BYTES, fetchWindowBytes),
                MAX_WINDOW_BYTES);
        if (max < fetchWindowBytes) {
            p.problem(FETCH_WINDOW_MAX_BYTES, max + " is below " + FETCH_WINDOW_BYTES + " (" + fetchWindowBytes + ")");
        }
        fetchWindowMaxBytes = max;
        pathMap = p.pathMap();
        copyMode = p.copyMode();
        brokerId = p.brokerId();
    }

    /**
     * @param configs the map given to configure
     * @return the settings
     * @throws IllegalArgumentException listing every bad setting by key (never a token)
     */
    static Settings parse(Map<String, ?> configs) {
        Parser p = new Parser(configs);
        for (String k : configs.keySet()) {
            if (k.startsWith("rsm.config.tierd.")) {
                p.problem(k, "the broker passes its rsm.config.* properties with the rsm.config. prefix stripped;"
                        + " pass " + k.substring("rsm.config.".length()));
            } else if (k.startsWith("tierd.") && !KEYS.contains(k)) {
                p.problem(k, "unknown setting (known: " + String.join(", ", new TreeSet<>(KEYS)) + ")");
            }
        }
        Settings s = new Settings(p);
        p.check();
        return s;
    }

    /** Reads and checks values, collecting every problem. */
    private static final class Parser {
        private final Map<String, ?> m;
        private final List<String> problems = new ArrayList<>();

        Parser(Map<String, ?> m) {
            this.m = m;
        }

        void problem(String key, String what) {
            problems.add(key + ": " + what);
        }

        void check() {
            if (!problems.isEmpty()) {
                throw new IllegalArgumentException("invalid tierd RSM plugin settings (rsm.config.*): "
                        + String.join("; ", problems));
            }
        }

        String text(String key) {
            Object v = m.get(key);
            if (v == null) {
                return null;
            }
            String s = v.toString().trim();
            return s.isEmpty() ? null : s;
        }

        int positiveInt(String key, int def, int max) {
            Object v = m.get(key);
            if (v == null || v.toString().trim().isEmpty()) {
                return def;
            }
            long n;
            if (v instanceof Integer || v instanceof Long || v instanceof Short) {
                n = ((Number) v).longValue();
            } else {
                try {
                    n = Long.parseLong(v.toString().trim());
                } catch (NumberFormatException e) {
                    problem(key, "\"" + v + "\" is not a whole number");
                    return def;
                }
            }
            if (n < 1 || n > max) {
                problem(key, n + " is out of range (1 to " + max + ")");
                return def;
            }
            return (int) n;
        }

        URI endpoint() {
            String s = text(ENDPOINT);
            if (s == null) {
                s = DEFAULT_ENDPOINT;
            }
            URI u;
            try {
                u = new URI(s);
            } catch (URISyntaxException e) {
                problem(ENDPOINT, "\"" + s + "\" is not a URL: " + e.getReason());
                return URI.create(DEFAULT_ENDPOINT);
            }
            String scheme = u.getScheme() == null ? "" : u.getScheme().toLowerCase(Locale.ROOT);
            if (!scheme.equals("http") && !scheme.equals("https")) {
                problem(ENDPOINT, "\"" + s + "\" is not an http:// or https:// URL");
            } else if (u.getHost() == null) {
                problem(ENDPOINT, "\"" + s + "\" names no host");
            } else if (u.getRawUserInfo() != null) {
                problem(ENDPOINT, "must not carry credentials; the token comes from " + TOKEN_FILE);
            } else if (u.getRawQuery() != null || u.getRawFragment() != null) {
                problem(ENDPOINT, "\"" + s + "\" must have no query or fragment");
            }
            String path = u.getRawPath() == null ? "" : u.getRawPath();
            while (path.endsWith("/")) {
                path = path.substring(0, path.length() - 1);
            }
            return URI.create(scheme + "://" + u.getRawAuthority() + path);
        }

        TokenFile tokenFile() {
            String s = text(TOKEN_FILE);
            if (s == null) {
                problem(TOKEN_FILE, "required: the file holding the bearer token of tierd's rsm.token_file");
                return null;
            }
            try {
                return new TokenFile(Paths.get(s));
            } catch (IllegalArgumentException e) {
                problem(TOKEN_FILE, e.getMessage());
                return null;
            }
        }

        Path caFile(URI endpoint) {
            String s = text(TLS_CA_FILE);
            if (s == null) {
                return null;
            }
            if (!"https".equals(endpoint.getScheme())) {
                problem(TLS_CA_FILE, "set, but " + ENDPOINT + " is not https://");
            }
            Path p = Paths.get(s);
            if (!Files.isReadable(p) || Files.isDirectory(p)) {
                problem(TLS_CA_FILE, s + " is not a readable file");
            }
            return p;
        }

        PathMap pathMap() {
            try {
                return PathMap.parse(text(PATH_MAP));
            } catch (IllegalArgumentException e) {
                problem(PATH_MAP, e.getMessage());
                return PathMap.IDENTITY;
            }
        }

        CopyMode copyMode() {
            String s = text(COPY_MODE);
            if (s == null || s.equalsIgnoreCase("path")) {
                return CopyMode.PATH;
            }
            if (s.equalsIgnoreCase("upload")) {
                return CopyMode.UPLOAD;
            }
            problem(COPY_MODE, "\"" + s + "\" is neither path nor upload");
            return CopyMode.PATH;
        }

        Integer brokerId() {
            Object v = m.get(BROKER_ID);
            if (v == null) {
                return null;
            }
            if (v instanceof Integer) {
                return (Integer) v;
            }
            try {
                return Integer.valueOf(v.toString().trim());
            } catch (NumberFormatException e) {
                problem(BROKER_ID, "\"" + v + "\" is not a whole number");
                return null;
            }
        }
    }
}
