package io.tierd.kafka.driver;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.HttpURLConnection;
import java.net.Proxy;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata.CustomMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteStorageManager;

/**
 * The Java side of {@code tierd bench}'s plugin cases: the tierd plugin called
 * as a broker calls it, beside raw requests to the object store made from the
 * same JVM with the plugin's own client stacks (a ranged GET as the plugin
 * reads a .log window: HttpURLConnection, read whole into one array; a PUT with
 * java.net.http, as the plugin sends its other requests), so that the floors
 * measure the same client stack. The bench (Go) sends one command a line
 * on standard input and reads one JSON line of measurements a command on
 * standard output; times are measured here, around the call alone.
 *
 * <pre>
 * usage: PluginBench --dir PARTITION_DIR --topic-id ID [--broker-id N]
 * commands (one a line, fields separated by one space):
 *   open ENDPOINT TOKEN_FILE [key=value ...]   (re)make the plugin as the broker does, configured with these settings
 *   copy BASE SEGMENT_ID                        copyLogSegmentData of the segment at BASE by path, as copy SEGMENT_ID
 *   delete SEGMENT_ID                           deleteLogSegmentData of that copy
 *   fetch SEGMENT_ID POS N                      fetchLogSegment(meta, POS), read up to N bytes, close
 *   get URL BASE POS N                          a ranged GET of bytes [POS, POS+N) of URL (a presigned URL of the copy's .log)
 *   put BASE LOG_URL INDEX_URL TIMEINDEX_URL    PUTs of the segment's .log, .index and .timeindex to presigned URLs
 *   readers N BYTES FETCH SEGMENT_ID...         N broker readers at once over the copies (in log order), each BYTES
 *   quit
 * answers: {"ns":T,"bytes":B} (fetch, get, copy, put, delete); readers:
 *   {"ns":WALL,"bytes":B,"lat_ns":[...]}; open, quit: {"ok":true}; any failure: {"error":"..."}
 * </pre>
 *
 * Every byte read (fetch, get, readers) is compared with the local segment
 * file; a difference is an error. A reader reads as the broker's
 * RemoteLogManager.read does: {@code fetchLogSegment(meta, position)} from an
 * offset-index position, up to the fetch size into a buffer of its own, then
 * closes the stream; its next read starts at the offset-index entry of the
 * first batch it did not take whole (at a copy's end it goes on to the next
 * copy, wrapping at the log's end). Reader i starts at copy i * copies / N.
 */
public final class PluginBench {
    private final PartitionDir pd;
    private final Uuid topicId;
    private final int brokerId;
    private final Map<Long, Seg> segs = new HashMap<>();
    private final Map<String, Copy> copies = new HashMap<>();
    private final HttpClient http = HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(10))
            .followRedirects(HttpClient.Redirect.NEVER)
            .build();
    private static final Duration TIMEOUT = Duration.ofSeconds(120);
    /**
     * The readers' threads, kept between commands: the bench counts the CPU of the
     * JVM's threads (per-thread counters, exact to the nanosecond), which a thread
     * that ended would leave out.
     */
    private final ExecutorService readerPool = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "reader");
        t.setDaemon(true);
        return t;
    });
    private RemoteStorageManager rsm;

    private PluginBench(PartitionDir pd, Uuid topicId, int brokerId) {
        this.pd = pd;
        this.topicId = topicId;
        this.brokerId = brokerId;
    }

    public static void main(String[] args) throws IOException {
        Path dir = null;
        Uuid topicId = null;
        int brokerId = 1;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--dir": dir = Paths.get(args[i + 1]); break;
                case "--topic-id": topicId = Uuid.fromString(args[i + 1]); break;
                case "--broker-id": brokerId = Integer.parseInt(args[i + 1]); break;
                default:
                    System.err.println("PluginBench: unknown option " + args[i]);
                    System.exit(2);
            }
        }
        if (dir == null || topicId == null || args.length % 2 != 0) {
            System.err.println("usage: PluginBench --dir PARTITION_DIR --topic-id ID [--broker-id N], then commands on stdin");
            System.exit(2);
        }
        PluginBench b = new PluginBench(new PartitionDir(dir), topicId, brokerId);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = System.out;
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split(" ");
            if (f[0].isEmpty()) {
                continue;
            }
            String answer;
            try {
                answer = b.command(f);
            } catch (Exception | AssertionError e) {
                answer = "{\"error\":" + quote(Report.describe(e)) + "}";
            }
            out.println(answer);
            out.flush();
            if (f[0].equals("quit")) {
                break;
            }
        }
        b.closePlugin();
    }

    private String command(String[] f) throws Exception {
        switch (f[0]) {
            case "open":
                return open(f);
            case "copy":
                return copy(Long.parseLong(f[1]), f[2]);
            case "delete":
                return delete(f[1]);
            case "fetch":
                return fetch(copy(f[1]), Long.parseLong(f[2]), Integer.parseInt(f[3]));
            case "get":
                return get(f[1], seg(Long.parseLong(f[2])), Long.parseLong(f[3]), Integer.parseInt(f[4]));
            case "put":
                return put(seg(Long.parseLong(f[1])), f[2], f[3], f[4]);
            case "readers":
                return readers(f);
            case "quit":
                return "{\"ok\":true}";
            default:
                throw new IllegalArgumentException("unknown command " + f[0]);
        }
    }

    private String open(String[] f) throws Exception {
        closePlugin();
        Map<String, Object> settings = new HashMap<>();
        for (int i = 3; i < f.length; i++) {
            int eq = f[i].indexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException("setting " + f[i] + " is not key=value");
            }
            settings.put(f[i].substring(0, eq), f[i].substring(eq + 1));
        }
        settings.put("tierd.endpoint", f[1]);
        settings.put("tierd.token.file", f[2]);
        settings.put("broker.id", brokerId);
        rsm = PluginLoader.load("io.tierd.kafka.TierdRemoteStorageManager", null, settings);
        return "{\"ok\":true}";
    }

    private void closePlugin() {
        if (rsm != null) {
            try {
                rsm.close();
            } catch (IOException e) {
                // Nothing held is lost: the next open makes a new client.
            }
            rsm = null;
        }
    }

    private RemoteStorageManager plugin() {
        if (rsm == null) {
            throw new IllegalStateException("no plugin: send open first");
        }
        return rsm;
    }

    private Seg seg(long base) throws IOException {
        Seg s = segs.get(base);
        if (s == null) {
            s = new Seg(BrokerSegment.of(pd, base, BrokerDriver.nextBase(pd, base)));
            segs.put(base, s);
        }
        return s;
    }

    private Copy copy(String id) {
        Copy c = copies.get(id);
        if (c == null) {
            throw new IllegalArgumentException("no copy " + id + " was made");
        }
        return c;
    }

    private String copy(long base, String id) throws Exception {
        Seg s = seg(base);
        RemoteLogSegmentMetadata started = s.bs.metadata(topicId, Uuid.fromString(id), brokerId);
        ByteBuffer epochs = s.bs.epochCheckpoint();
        long t = System.nanoTime();
        java.util.Optional<CustomMetadata> cm = plugin().copyLogSegmentData(started, s.bs.data(epochs));
        long ns = System.nanoTime() - t;
        copies.put(id, new Copy(s, BrokerSegment.finished(started, cm)));
        return "{\"ns\":" + ns + ",\"bytes\":" + s.size + "}";
    }

    private String delete(String id) throws Exception {
        Copy c = copy(id);
        long t = System.nanoTime();
        plugin().deleteLogSegmentData(c.meta);
        long ns = System.nanoTime() - t;
        copies.remove(id);
        return "{\"ns\":" + ns + ",\"bytes\":0}";
    }

    /** One broker read: the stream from pos, up to n bytes into a buffer of its own, closed. */
    private byte[] read(Copy c, long pos, int n) throws Exception {
        byte[] b = new byte[n];
        int off = 0;
        try (InputStream in = plugin().fetchLogSegment(c.meta, (int) pos)) {
            while (off < n) {
                int r = in.read(b, off, n - off);
                if (r < 0) {
                    break;
                }
                off += r;
            }
        }
        return off == n ? b : java.util.Arrays.copyOf(b, off);
    }

    private String fetch(Copy c, long pos, int n) throws Exception {
        long t = System.nanoTime();
        byte[] got = read(c, pos, n);
        long ns = System.nanoTime() - t;
        c.seg.check("fetchLogSegment", pos, got, Math.min(n, c.seg.size - pos));
        return "{\"ns\":" + ns + ",\"bytes\":" + got.length + "}";
    }

    /**
     * The floor of a read: one ranged GET from the store, sent and read as the
     * plugin reads a window (HttpURLConnection, no proxy, the answer read whole
     * into one array), then copied into the broker's buffer as the plugin's
     * stream copies a window.
     */
    private String get(String url, Seg s, long pos, int n) throws Exception {
        long t = System.nanoTime();
        HttpURLConnection c = (HttpURLConnection) URI.create(url).toURL().openConnection(Proxy.NO_PROXY);
        c.setConnectTimeout(10_000);
        c.setReadTimeout((int) TIMEOUT.toMillis());
        c.setInstanceFollowRedirects(false);
        c.setUseCaches(false);
        c.setRequestProperty("Range", "bytes=" + pos + "-" + (pos + n - 1));
        int status = c.getResponseCode();
        byte[] body;
        try (InputStream in = status >= 400 ? c.getErrorStream() : c.getInputStream()) {
            long len = c.getContentLengthLong();
            body = new byte[(int) Math.max(0, len)];
            int off = 0;
            while (in != null && off < body.length) {
                int r = in.read(body, off, body.length - off);
                if (r < 0) {
                    throw new IOException("GET bytes " + pos + "-" + (pos + n - 1) + ": the answer ended after " + off + " bytes");
                }
                off += r;
            }
        }
        byte[] got = new byte[body.length];
        System.arraycopy(body, 0, got, 0, got.length);
        long ns = System.nanoTime() - t;
        if (status != 206) {
            throw new IOException("GET bytes " + pos + "-" + (pos + n - 1) + ": status " + status + ": "
                    + Report.oneLine(new String(body, StandardCharsets.UTF_8)));
        }
        s.check("ranged GET", pos, got, Math.min(n, s.size - pos));
        return "{\"ns\":" + ns + ",\"bytes\":" + got.length + "}";
    }

    /**
     * The floor of a copy: the segment's .log, .index and .timeindex PUT one after
     * another with java.net.http (send, which starts no thread of its own; the bench
     * counts the CPU of the JVM's threads, and a thread that ends within a call
     * would not be counted).
     */
    private String put(Seg s, String logUrl, String indexUrl, String timeUrl) throws Exception {
        long t = System.nanoTime();
        for (String[] p : new String[][] {{logUrl, "log"}, {indexUrl, "index"}, {timeUrl, "timeindex"}}) {
            HttpRequest req = HttpRequest.newBuilder(URI.create(p[0])).timeout(TIMEOUT)
                    .PUT(HttpRequest.BodyPublishers.ofFile(pd.file(s.bs.base, p[1]))).build();
            HttpResponse<byte[]> r = http.send(req, HttpResponse.BodyHandlers.ofByteArray());
            if (r.statusCode() != 200) {
                throw new IOException("PUT of " + pd.file(s.bs.base, p[1]).getFileName() + ": status " + r.statusCode()
                        + ": " + Report.oneLine(new String(r.body(), StandardCharsets.UTF_8)));
            }
        }
        long ns = System.nanoTime() - t;
        return "{\"ns\":" + ns + ",\"bytes\":" + s.size + "}";
    }

    private String readers(String[] f) throws Exception {
        int n = Integer.parseInt(f[1]);
        long per = Long.parseLong(f[2]);
        int fetchBytes = Integer.parseInt(f[3]);
        List<Copy> log = new ArrayList<>();
        for (int i = 4; i < f.length; i++) {
            log.add(copy(f[i]));
        }
        if (n < 1 || log.isEmpty()) {
            throw new IllegalArgumentException("readers needs N >= 1 and at least one copy");
        }
        long[][] lat = new long[n][];
        long[] bytes = new long[n];
        Exception[] errs = new Exception[n];
        CountDownLatch start = new CountDownLatch(1);
        List<Future<?>> threads = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            final int id = i;
            threads.add(readerPool.submit(() -> {
                List<Long> ls = new ArrayList<>();
                try {
                    start.await();
                    int c = id * log.size() / n;
                    long pos = 0;
                    while (bytes[id] < per) {
                        Copy cp = log.get(c);
                        long t0 = System.nanoTime();
                        byte[] got = read(cp, pos, fetchBytes);
                        ls.add(System.nanoTime() - t0);
                        cp.seg.check("reader " + id, pos, got, Math.min(fetchBytes, cp.seg.size - pos));
                        bytes[id] += got.length;
                        long next = cp.seg.nextRead(pos, got.length);
                        if (next >= cp.seg.size) {
                            c = (c + 1) % log.size();
                            next = 0;
                        }
                        pos = next;
                    }
                } catch (Exception e) {
                    errs[id] = e;
                }
                long[] a = new long[ls.size()];
                for (int k = 0; k < a.length; k++) {
                    a[k] = ls.get(k);
                }
                lat[id] = a;
            }));
        }
        long t0 = System.nanoTime();
        start.countDown();
        for (Future<?> t : threads) {
            t.get();
        }
        long wall = System.nanoTime() - t0;
        for (Exception e : errs) {
            if (e != null) {
                throw e;
            }
        }
        StringBuilder sb = new StringBuilder("{\"ns\":").append(wall);
        long total = 0;
        for (long b : bytes) {
            total += b;
        }
        sb.append(",\"bytes\":").append(total).append(",\"lat_ns\":[");
        boolean first = true;
        for (long[] a : lat) {
            for (long v : a) {
                sb.append(first ? "" : ",").append(v);
                first = false;
            }
        }
        return sb.append("]}").toString();
    }

    static String quote(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (char ch : s.toCharArray()) {
            if (ch == '"' || ch == '\\') {
                sb.append('\\').append(ch);
            } else if (ch < 0x20) {
                sb.append(String.format("\\u%04x", (int) ch));
            } else {
                sb.append(ch);
            }
        }
        return sb.append('"').toString();
    }

    /** A copy made by this run: its segment and the metadata the broker keeps for it. */
    private static final class Copy {
        final Seg seg;
        final RemoteLogSegmentMetadata meta;

        Copy(Seg seg, RemoteLogSegmentMetadata meta) {
            this.seg = seg;
            this.meta = meta;
        }
    }

    /** A local segment: its file mapped for the comparisons, its batches and its offset index. */
    private static final class Seg {
        final BrokerSegment bs;
        final long size;
        final ByteBuffer log;
        /** Per batch: position, end, base offset. */
        final long[] pos;
        final long[] end;
        final long[] baseOffset;
        /** The offset index's real entries: absolute offset and position. */
        final long[] idxOffset;
        final long[] idxPos;

        Seg(BrokerSegment bs) throws IOException {
            this.bs = bs;
            try (FileChannel ch = FileChannel.open(bs.log, StandardOpenOption.READ)) {
                size = ch.size();
                log = ch.map(FileChannel.MapMode.READ_ONLY, 0, size);
            }
            List<long[]> bl = new ArrayList<>();
            for (long p = 0; p + 12 <= size; ) {
                long off = log.getLong((int) p);
                int len = log.getInt((int) p + 8);
                if (len <= 0 || p + 12 + len > size) {
                    break;
                }
                bl.add(new long[] {p, p + 12 + len, off});
                p += 12 + len;
            }
            pos = new long[bl.size()];
            end = new long[bl.size()];
            baseOffset = new long[bl.size()];
            for (int i = 0; i < bl.size(); i++) {
                pos[i] = bl.get(i)[0];
                end[i] = bl.get(i)[1];
                baseOffset[i] = bl.get(i)[2];
            }
            ByteBuffer idx = ByteBuffer.wrap(SegmentChecks.realEntries(bs.index, 8));
            int k = idx.remaining() / 8;
            idxOffset = new long[k];
            idxPos = new long[k];
            for (int i = 0; i < k; i++) {
                idxOffset[i] = bs.base + idx.getInt();
                idxPos[i] = idx.getInt() & 0xffffffffL;
            }
        }

        /** Fails unless got is the file's bytes [from, from+want). */
        void check(String what, long from, byte[] got, long want) throws IOException {
            if (got.length != want) {
                throw new IOException(what + " of " + bs.name() + " from " + from + ": " + got.length + " bytes, want " + want);
            }
            ByteBuffer w = log.duplicate();
            w.position((int) from).limit((int) (from + want));
            if (ByteBuffer.wrap(got).mismatch(w) >= 0) {
                throw new IOException(what + " of " + bs.name() + " from " + from + ": bytes differ from the local segment's");
            }
        }

        /**
         * Where the broker's next read starts after taking got bytes from pos:
         * the offset-index position of the first batch not taken whole (that
         * batch's end when it is larger than a read), or the size at the end.
         */
        long nextRead(long from, int got) {
            long stop = from + got;
            if (stop >= size) {
                return size;
            }
            int lo = 0;
            int hi = end.length; // first batch with end > stop
            while (lo < hi) {
                int m = (lo + hi) >>> 1;
                if (end[m] > stop) {
                    hi = m;
                } else {
                    lo = m + 1;
                }
            }
            if (lo == end.length) {
                return size;
            }
            long next = lookup(baseOffset[lo]);
            return next <= from ? end[lo] : next;
        }

        /** The offset index's position for offset: its largest entry at or below it, else 0. */
        long lookup(long offset) {
            int lo = 0;
            int hi = idxOffset.length;
            while (lo < hi) {
                int m = (lo + hi) >>> 1;
                if (idxOffset[m] <= offset) {
                    lo = m + 1;
                } else {
                    hi = m;
                }
            }
            return lo == 0 ? 0 : idxPos[lo - 1];
        }
    }
}
