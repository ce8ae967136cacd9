package io.tierd.kafka;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import com.sun.net.httpserver.HttpsConfigurator;
import com.sun.net.httpserver.HttpsServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import javax.net.ssl.SSLContext;

/**
 * A fake tierd RSM endpoint for the plugin's tests: the JDK's HttpServer on a real
 * loopback socket, speaking the wire of rsmapi/doc.go. It stores what copies give
 * it in memory (by path, reading the named files; by upload, from the body),
 * serves ranged reads and index reads, deletes idempotently, checks the bearer
 * token, records every request, and lets a test inject answers or hold requests.
 * It trims OFFSET and TIMESTAMP indexes to their real entries (trailing all-zero
 * entries cut) as tierd does.
 */
public final class FakeTierd implements AutoCloseable {
    /** One recorded request. */
    public static final class Request {
        public final String method;
        public final String path;
        public final String protocol;
        public final Map<String, List<String>> headers;
        public final byte[] body;

        Request(String method, String path, String protocol, Map<String, List<String>> headers, byte[] body) {
            this.method = method;
            this.path = path;
            this.protocol = protocol;
            this.headers = headers;
            this.body = body;
        }

        /** @return the first value of a header, or null */
        public String header(String name) {
            for (Map.Entry<String, List<String>> e : headers.entrySet()) {
                if (e.getKey().equalsIgnoreCase(name) && !e.getValue().isEmpty()) {
                    return e.getValue().get(0);
                }
            }
            return null;
        }

        /** @return the body as UTF-8 */
        public String text() {
            return new String(body, StandardCharsets.UTF_8);
        }
    }

    /** An injected answer. */
    public static final class Answer {
        final int status;
        final byte[] body;

        public Answer(int status, String body) {
            this.status = status;
            this.body = body == null ? new byte[0] : body.getBytes(StandardCharsets.UTF_8);
        }

        /** @return tierd's error answer: {"error": error, "reason": reason} */
        public static Answer error(int status, String reason, String error) {
            StringBuilder sb = new StringBuilder("{\"error\":");
            Json.quote(sb, error);
            sb.append(",\"reason\":");
            Json.quote(sb, reason);
            return new Answer(status, sb.append('}').toString());
        }
    }

    /** Runs before a request is handled; may block, or return an answer to send instead. */
    public interface Hook {
        Answer before(Request r) throws Exception;
    }

    /** A stored copy. */
    public static final class Copy {
        public final Map<String, byte[]> objects = new ConcurrentHashMap<>();
        public volatile String json;
    }

    public final Map<String, Copy> copies = new ConcurrentHashMap<>();
    public final List<Request> requests = Collections.synchronizedList(new ArrayList<>());
    public final AtomicInteger inFlight = new AtomicInteger();
    public volatile String token;
    public volatile Hook hook;
    private final HttpServer server;
    private final ExecutorService pool;

    /**
     * Waits until no exchange is in flight: a handler ends just after its answer's
     * last byte went out, which the client may already have read.
     *
     * @return whether none was, within 10 s
     */
    public boolean settles() throws InterruptedException {
        for (long end = System.nanoTime() + 10_000_000_000L; System.nanoTime() - end < 0; Thread.sleep(5)) {
            if (inFlight.get() == 0) {
                return true;
            }
        }
        return inFlight.get() == 0;
    }

    /** A fake with an unbounded handler pool. */
    public FakeTierd(String token) throws IOException {
        this(token, 0, null);
    }

    /**
     * @param token the bearer token it accepts
     * @param threads handler threads; 0 for as many as needed
     * @param tls when non-null, serve https with this context
     */
    public FakeTierd(String token, int threads, SSLContext tls) throws IOException {
        this.token = token;
        InetSocketAddress a = new InetSocketAddress(InetAddress.getLoopbackAddress(), 0);
        if (tls != null) {
            HttpsServer s = HttpsServer.create(a, 0);
            s.setHttpsConfigurator(new HttpsConfigurator(tls));
            server = s;
        } else {
            server = HttpServer.create(a, 0);
        }
        pool = threads == 0 ? Executors.newCachedThreadPool() : Executors.newFixedThreadPool(threads);
        server.setExecutor(pool);
        server.createContext("/", this::handle);
        server.start();
    }

    /** @return the endpoint URL, http://127.0.0.1:port */
    public String endpoint() {
        return (server instanceof HttpsServer ? "https" : "http") + "://127.0.0.1:" + server.getAddress().getPort();
    }

    @Override
    public void close() {
        server.stop(0);
        pool.shutdownNow();
    }

    /** @return the recorded requests of a method whose path ends with suffix */
    public List<Request> requests(String method, String suffix) {
        List<Request> out = new ArrayList<>();
        synchronized (requests) {
            for (Request r : requests) {
                if (r.method.equals(method) && r.path.endsWith(suffix)) {
                    out.add(r);
                }
            }
        }
        return out;
    }

    private void handle(HttpExchange ex) throws IOException {
        inFlight.incrementAndGet();
        try {
            byte[] body;
            try (InputStream in = ex.getRequestBody()) {
                body = in.readAllBytes();
            }
            Request r = new Request(ex.getRequestMethod(), ex.getRequestURI().getRawPath(), ex.getProtocol(),
                    ex.getRequestHeaders(), body);
            requests.add(r);
            String auth = r.header("Authorization");
            if (auth == null || !auth.equals("Bearer " + token)) {
                send(ex, Answer.error(401, "UNAUTHENTICATED", "rsm: no or wrong bearer token"), null);
                return;
            }
            Hook h = hook;
            if (h != null) {
                Answer a;
                try {
                    a = h.before(r);
                } catch (Exception e) {
                    a = Answer.error(500, "INTERNAL", "hook: " + e);
                }
                if (a != null) {
                    send(ex, a, null);
                    return;
                }
            }
            route(ex, r);
        } catch (RuntimeException e) {
            send(ex, Answer.error(500, "INTERNAL", e.toString()), null);
        } finally {
            ex.close();
            inFlight.decrementAndGet();
        }
    }

    private void route(HttpExchange ex, Request r) throws IOException {
        String[] p = r.path.split("/");
        // ["", "v1", "segments", topic, partition, start, id, ...]
        if (p.length == 3 && r.path.equals("/v1/health")) {
            send(ex, new Answer(200, "{\"status\":\"ok\"}"), null);
            return;
        }
        if (p.length < 7 || !p[1].equals("v1") || !p[2].equals("segments")) {
            send(ex, Answer.error(404, "NOT_FOUND", "no such route " + r.path), null);
            return;
        }
        String c = String.join("/", Arrays.copyOfRange(p, 0, 7));
        if (p.length == 7 && r.method.equals("PUT")) {
            put(ex, r, c);
        } else if (p.length == 7 && r.method.equals("DELETE")) {
            copies.remove(c);
            send(ex, new Answer(204, null), null);
        } else if (p.length == 8 && p[7].equals("log") && r.method.equals("GET")) {
            Copy cp = copies.get(c);
            if (cp == null) {
                send(ex, Answer.error(404, "NOT_FOUND", "rsm: no copy " + c), null);
                return;
            }
            range(ex, r, cp.objects.get("LOG"));
        } else if (p.length == 9 && p[7].equals("index") && r.method.equals("GET")) {
            Copy cp = copies.get(c);
            byte[] obj = cp == null ? null : cp.objects.get(p[8]);
            if (obj == null) {
                send(ex, Answer.error(404, "NOT_FOUND", "rsm: no " + p[8] + " object in " + c), null);
                return;
            }
            send(ex, new Answer(200, null), obj);
        } else {
            send(ex, Answer.error(400, "INVALID_ARGUMENT", r.method + " " + r.path), null);
        }
    }

    private void put(HttpExchange ex, Request r, String c) throws IOException {
        String ct = r.header("Content-Type");
        Copy cp = new Copy();
        Map<?, ?> m;
        if ("application/vnd.tierd.segment".equals(ct)) {
            ByteBuffer b = ByteBuffer.wrap(r.body);
            int n = b.getInt();
            byte[] json = new byte[n];
            b.get(json);
            cp.json = new String(json, StandardCharsets.UTF_8);
            m = (Map<?, ?>) Json.parse(cp.json);
            String[][] parts = {{"logSegmentBytes", "LOG"}, {"offsetIndexBytes", "OFFSET"}, {"timeIndexBytes", "TIMESTAMP"},
                {"transactionIndexBytes", "TRANSACTION"}, {"producerSnapshotBytes", "PRODUCER_SNAPSHOT"}};
            for (String[] part : parts) {
                Object len = m.get(part[0]);
                if (len != null) {
                    byte[] obj = new byte[(int) (long) (Long) len];
                    b.get(obj);
                    cp.objects.put(part[1], obj);
                }
            }
            if (b.hasRemaining()) {
                send(ex, Answer.error(400, "INVALID_ARGUMENT", b.remaining() + " bytes after the files"), null);
                return;
            }
        } else {
            cp.json = r.text();
            m = (Map<?, ?>) Json.parse(cp.json);
            String[][] parts = {{"logSegment", "LOG"}, {"offsetIndex", "OFFSET"}, {"timeIndex", "TIMESTAMP"},
                {"transactionIndex", "TRANSACTION"}, {"producerSnapshot", "PRODUCER_SNAPSHOT"}};
            for (String[] part : parts) {
                Object path = m.get(part[0]);
                if (path == null) {
                    continue;
                }
                Path f = Paths.get((String) path);
                if (!Files.isReadable(f)) {
                    send(ex, Answer.error(403, "PATH_NOT_ALLOWED", "rsm: cannot open " + path), null);
                    return;
                }
                cp.objects.put(part[1], Files.readAllBytes(f));
            }
        }
        cp.objects.computeIfPresent("OFFSET", (k, v) -> trim(v, 8));
        cp.objects.computeIfPresent("TIMESTAMP", (k, v) -> trim(v, 12));
        cp.objects.put("LEADER_EPOCH", Base64.getDecoder().decode((String) m.get("leaderEpochCheckpoint")));
        copies.put(c, cp);
        int flags = (cp.objects.containsKey("TRANSACTION") ? 1 : 0) | (cp.objects.containsKey("PRODUCER_SNAPSHOT") ? 2 : 0);
        String cm = Base64.getEncoder().encodeToString(new byte[] {0x74, 1, (byte) flags});
        send(ex, new Answer(200, "{\"customMetadata\":\"" + cm + "\",\"bytes\":" + cp.objects.get("LOG").length + "}"), null);
    }

    /** Cuts trailing all-zero entries (and a partial entry) of an index. */
    static byte[] trim(byte[] idx, int entry) {
        int n = idx.length / entry;
        while (n > 0) {
            boolean zero = true;
            for (int i = (n - 1) * entry; i < n * entry; i++) {
                zero &= idx[i] == 0;
            }
            if (!zero) {
                break;
            }
            n--;
        }
        return Arrays.copyOf(idx, n * entry);
    }

    private void range(HttpExchange ex, Request r, byte[] log) throws IOException {
        String range = r.header("Range");
        if (range == null) {
            send(ex, new Answer(200, null), log);
            return;
        }
        if (!range.startsWith("bytes=") || range.indexOf('-') < 0) {
            send(ex, Answer.error(400, "INVALID_ARGUMENT", "bad Range " + range), null);
            return;
        }
        String[] ab = range.substring(6).split("-", -1);
        long a = Long.parseLong(ab[0]);
        long b = ab[1].isEmpty() ? Long.MAX_VALUE : Long.parseLong(ab[1]);
        if (a > log.length) {
            send(ex, Answer.error(416, "RANGE_NOT_SATISFIABLE", "start " + a + " past the end " + log.length), null);
            return;
        }
        if (a == log.length) {
            ex.getResponseHeaders().set("Content-Range", "bytes */" + log.length);
            send(ex, new Answer(206, null), null);
            return;
        }
        long last = Math.min(b, log.length - 1);
        ex.getResponseHeaders().set("Content-Range", "bytes " + a + "-" + last + "/" + log.length);
        send(ex, new Answer(206, null), Arrays.copyOfRange(log, (int) a, (int) last + 1));
    }

    private static void send(HttpExchange ex, Answer a, byte[] raw) throws IOException {
        byte[] body = raw != null ? raw : a.body;
        if (raw == null && a.body.length > 0) {
            ex.getResponseHeaders().set("Content-Type", "application/json");
        }
        ex.sendResponseHeaders(a.status, body.length == 0 ? -1 : body.length);
        if (body.length > 0) {
            try (OutputStream o = ex.getResponseBody()) {
                o.write(body);
            }
        }
    }
}
