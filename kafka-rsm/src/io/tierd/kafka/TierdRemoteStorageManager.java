package io.tierd.kafka;

import java.io.ByteArrayInputStream;
import java.io.InputStream;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import org.apache.kafka.server.log.remote.storage.LogSegmentData;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata.CustomMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteResourceNotFoundException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageManager;

/**
 * Kafka's RemoteStorageManager (KIP-405) backed by the tierd sidecar: every call
 * is forwarded to tierd's RSM endpoint over HTTP/1.1, by the wire of
 * rsmapi/doc.go (version 1). Set {@code remote.log.storage.manager.class.name}
 * to this class and {@code remote.log.storage.manager.class.path} to its jar;
 * the settings are {@code rsm.config.tierd.*} (see kafka-rsm/README.md).
 *
 * <p>Implements the interface as Kafka 3.6 to 4.x define it, and the
 * {@code long} fetch overloads of newer Kafka (KIP-1333), declared without
 * {@code @Override} so one jar links against every version. Thread-safe: the
 * broker calls it from its copy, expiration, reader and fetcher threads at once.
 *
 * <p>Errors: a missing copy or index is {@link RemoteResourceNotFoundException};
 * tierd unreachable, overloaded (429, 503) or timing out (504, or no answer in
 * time) is RetriableRemoteStorageException where the broker has it, else
 * {@link RemoteStorageException}; every other failure is a
 * RemoteStorageException carrying tierd's message. An interrupted call keeps
 * the thread's interrupt flag and throws RemoteStorageException (a read of the
 * .log sees the interrupt before each window it asks for; a window on the wire
 * completes first, see TierdClient). No message or log line holds the bearer
 * token.
 */
public class TierdRemoteStorageManager implements RemoteStorageManager {
    private static final System.Logger LOG = System.getLogger(TierdRemoteStorageManager.class.getName());

    /** Largest answer to a copy or a delete, bytes (tierd's is a line of JSON). */
    static final long ANSWER_BYTES = 1 << 20;
    /** Largest index object, bytes: tierd stores none larger (rsmapi/doc.go). */
    static final long INDEX_BYTES = 1 << 30;

    private volatile TierdClient client;
    private volatile boolean closed;

    /** Made by the broker with no arguments; {@link #configure} follows. */
    public TierdRemoteStorageManager() {
    }

    /**
     * Reads the settings: the broker's {@code rsm.config.*} properties with the
     * prefix stripped, plus {@code broker.id} (an Integer).
     *
     * @param configs the settings
     * @throws IllegalArgumentException naming every bad setting
     */
    @Override
    public void configure(Map<String, ?> configs) {
        Settings s = Settings.parse(configs);
        TierdClient c = new TierdClient(s);
        TierdClient old = client;
        client = c;
        closed = false;
        if (old != null) {
            old.close();
        }
        LOG.log(System.Logger.Level.INFO, "tierd RSM plugin: endpoint {0}, copy mode {1}, {2} path rewrite(s), broker {3}",
                s.endpoint, s.copyMode.name().toLowerCase(Locale.ROOT), s.pathMap.size(), s.brokerId);
    }

    private TierdClient client(String what) throws RemoteStorageException {
        TierdClient c = client;
        if (closed) {
            throw new RemoteStorageException(what + ": the tierd RSM plugin is closed");
        }
        if (c == null) {
            throw new RemoteStorageException(what + ": the tierd RSM plugin is not configured");
        }
        return c;
    }

    /**
     * Copies a rolled segment: {@code PUT C}, answered only once tierd has stored
     * every object. Idempotent: a retried copy of the same segment id is made again.
     *
     * @return tierd's 3 bytes of custom metadata (0x74, version 1, flags), or empty if tierd sent none
     */
    @Override
    public Optional<CustomMetadata> copyLogSegmentData(RemoteLogSegmentMetadata remoteLogSegmentMetadata,
                                                       LogSegmentData logSegmentData) throws RemoteStorageException {
        SegmentRef ref = SegmentRef.of(remoteLogSegmentMetadata);
        String what = "copy of " + ref;
        TierdClient c = client(what);
        CopyRequest body = CopyRequest.of(remoteLogSegmentMetadata, logSegmentData, c.settings, what);
        HttpResponse<byte[]> r;
        try {
            r = c.exchange(what, token -> c.request(ref.path(), c.settings.copyTimeout, token)
                    .header("Content-Type", body.contentType)
                    .PUT(body.body)
                    .build(), c.settings.copyTimeout, ANSWER_BYTES);
        } finally {
            // The broker's files are valid only during this call: an upload cut
            // short (a timeout, an early answer) must not keep one open.
            body.close();
        }
        if (r.statusCode() / 100 != 2) {
            throw Errors.forStatus(what, r.statusCode(), r.body());
        }
        return customMetadata(what, r.body());
    }

    private static Optional<CustomMetadata> customMetadata(String what, byte[] body) throws RemoteStorageException {
        Object cm;
        try {
            Object v = Json.parse(new String(body, StandardCharsets.UTF_8));
            if (!(v instanceof Map)) {
                throw new IllegalArgumentException("not a JSON object");
            }
            cm = ((Map<?, ?>) v).get("customMetadata");
            if (cm != null && !(cm instanceof String)) {
                throw new IllegalArgumentException("customMetadata is not a string");
            }
            if (cm == null || ((String) cm).isEmpty()) {
                return Optional.empty();
            }
            return Optional.of(new CustomMetadata(Base64.getDecoder().decode((String) cm)));
        } catch (IllegalArgumentException e) {
            throw new RemoteStorageException(what + ": tierd's answer is not the copy's JSON: " + e.getMessage(), e);
        }
    }

    /**
     * Bytes from startPosition (inclusive) to the end of the segment. (Deprecated in
     * newest Kafka, which calls the long overload; kept for every broker before it.)
     */
    @Override
    @SuppressWarnings("deprecation")
    public InputStream fetchLogSegment(RemoteLogSegmentMetadata remoteLogSegmentMetadata,
                                       int startPosition) throws RemoteStorageException {
        return fetchLogSegment(remoteLogSegmentMetadata, (long) startPosition);
    }

    /** Bytes from startPosition to endPosition, both inclusive (ending early at the segment's end). */
    @Override
    @SuppressWarnings("deprecation")
    public InputStream fetchLogSegment(RemoteLogSegmentMetadata remoteLogSegmentMetadata,
                                       int startPosition, int endPosition) throws RemoteStorageException {
        return fetchLogSegment(remoteLogSegmentMetadata, (long) startPosition, (long) endPosition);
    }

    /**
     * The {@code long} overload of newer Kafka (KIP-1333); not marked {@code @Override}
     * so that the class links against brokers without it.
     *
     * @param remoteLogSegmentMetadata the copy
     * @param startPosition first byte, inclusive, at least 0
     * @return the bytes to the end of the segment
     * @throws RemoteStorageException as the class says
     */
    public InputStream fetchLogSegment(RemoteLogSegmentMetadata remoteLogSegmentMetadata,
                                       long startPosition) throws RemoteStorageException {
        checkPositions(startPosition, Long.MAX_VALUE);
        return fetch(remoteLogSegmentMetadata, startPosition, Long.MAX_VALUE);
    }

    /**
     * The {@code long} overload of newer Kafka (KIP-1333); not marked {@code @Override}.
     *
     * @param remoteLogSegmentMetadata the copy
     * @param startPosition first byte, inclusive, at least 0
     * @param endPosition last byte, inclusive, at least startPosition
     * @return the bytes [startPosition, min(endPosition, end of segment)]
     * @throws RemoteStorageException as the class says
     */
    public InputStream fetchLogSegment(RemoteLogSegmentMetadata remoteLogSegmentMetadata,
                                       long startPosition, long endPosition) throws RemoteStorageException {
        checkPositions(startPosition, endPosition);
        return fetch(remoteLogSegmentMetadata, startPosition, endPosition);
    }

    private static void checkPositions(long start, long end) {
        if (start < 0) {
            throw new IllegalArgumentException("start position " + start + " is negative");
        }
        if (end < start) {
            throw new IllegalArgumentException("end position " + end + " is before start position " + start);
        }
    }

    private InputStream fetch(RemoteLogSegmentMetadata meta, long start, long end) throws RemoteStorageException {
        SegmentRef ref = SegmentRef.of(meta);
        String what = "read of " + ref;
        TierdClient c = client(what);
        LogReader reader = new LogReader(c, ref, what);
        return RangeInputStream.open(reader, start, end, c.settings.fetchWindowBytes, c.settings.fetchWindowMaxBytes);
    }

    /**
     * A whole index object in memory. TRANSACTION answers
     * RemoteResourceNotFoundException without asking tierd when tierd's custom
     * metadata or the broker's isTxnIdxEmpty() says the copy has none (the
     * broker's index cache turns that into an empty index).
     */
    @Override
    public InputStream fetchIndex(RemoteLogSegmentMetadata remoteLogSegmentMetadata,
                                  IndexType indexType) throws RemoteStorageException {
        if (indexType == null) {
            throw new NullPointerException("indexType can not be null");
        }
        SegmentRef ref = SegmentRef.of(remoteLogSegmentMetadata);
        String what = indexType + " index of " + ref;
        TierdClient c = client(what);
        if (indexType == IndexType.TRANSACTION && TierdCustomMetadata.knownWithoutTransactionIndex(remoteLogSegmentMetadata)) {
            throw new RemoteResourceNotFoundException(what + ": the copy has no transaction index");
        }
        HttpResponse<byte[]> r = c.exchange(what, token -> c.request(ref.path() + "/index/" + indexType.name(),
                c.settings.requestTimeout, token).GET().build(), c.settings.requestTimeout, INDEX_BYTES);
        if (r.statusCode() != 200) {
            throw Errors.forStatus(what, r.statusCode(), r.body());
        }
        return new ByteArrayInputStream(r.body());
    }

    /** Deletes the copy: {@code DELETE C}; a copy that is not there counts as deleted (2xx or 404). */
    @Override
    public void deleteLogSegmentData(RemoteLogSegmentMetadata remoteLogSegmentMetadata) throws RemoteStorageException {
        SegmentRef ref = SegmentRef.of(remoteLogSegmentMetadata);
        String what = "delete of " + ref;
        TierdClient c = client(what);
        HttpResponse<byte[]> r = c.exchange(what, token -> c.request(ref.path(), c.settings.requestTimeout, token)
                .DELETE().build(), c.settings.requestTimeout, ANSWER_BYTES);
        if (r.statusCode() / 100 != 2 && r.statusCode() != 404) {
            throw Errors.forStatus(what, r.statusCode(), r.body());
        }
    }

    /**
     * Ends the client; later calls throw RemoteStorageException. The client is
     * dropped as well, so that its threads end even on Java before 21 (where it
     * cannot be shut down) while the broker keeps this object.
     */
    @Override
    public void close() {
        closed = true;
        TierdClient c = client;
        client = null;
        if (c != null) {
            c.close();
        }
    }

    /** Reads ranges of a copy's .log: {@code GET C/log} with {@code Range: bytes=a-b}, answered 206. */
    private static final class LogReader implements RangeInputStream.Source {
        private final TierdClient c;
        private final SegmentRef ref;
        private final String what;

        LogReader(TierdClient c, SegmentRef ref, String what) {
            this.c = c;
            this.ref = ref;
            this.what = what;
        }

        @Override
        public RangeInputStream.Window read(long first, long last) throws RemoteStorageException {
            String range = "bytes=" + first + "-" + (last == Long.MAX_VALUE ? "" : Long.toString(last));
            long asked = last - first >= c.settings.fetchWindowMaxBytes ? c.settings.fetchWindowMaxBytes : last - first + 1;
            TierdClient.Answer r = c.getRange(what, ref.path() + "/log", range, c.settings.requestTimeout, asked);
            if (r.status != 206) {
                if (r.status / 100 == 2) {
                    throw new RemoteStorageException(what + ": tierd answered " + r.status + " to " + range
                            + "; a ranged read answers 206");
                }
                throw Errors.forStatus(what, r.status, r.body);
            }
            ContentRange cr = ContentRange.parse(r.contentRange);
            if (cr == null) {
                throw new RemoteStorageException(what + ": tierd's 206 answer to " + range
                        + " has no usable Content-Range: " + (r.contentRange == null ? "(none)" : r.contentRange));
            }
            byte[] b = r.body;
            boolean ok = cr.first < 0
                    ? b.length == 0 && first == cr.size
                    : cr.first == first && cr.last <= last && cr.last < cr.size && b.length == cr.last - cr.first + 1
                        && (cr.last == Math.min(last, cr.size - 1));
            if (!ok) {
                throw new RemoteStorageException(what + ": tierd's answer to " + range + " does not match it (Content-Range "
                        + r.contentRange + ", " + b.length + " bytes)");
            }
            return new RangeInputStream.Window(b, cr.size);
        }
    }

    /** The value of a Content-Range header: {@code bytes a-b/size} or {@code bytes * /size}. */
    private static final class ContentRange {
        final long first;
        final long last;
        final long size;

        private ContentRange(long first, long last, long size) {
            this.first = first;
            this.last = last;
            this.size = size;
        }

        static ContentRange parse(String v) {
            if (v == null || !v.startsWith("bytes ")) {
                return null;
            }
            String s = v.substring(6).trim();
            int slash = s.indexOf('/');
            if (slash < 0) {
                return null;
            }
            try {
                long size = Long.parseLong(s.substring(slash + 1));
                String r = s.substring(0, slash);
                if (r.equals("*")) {
                    return new ContentRange(-1, -1, size);
                }
                int dash = r.indexOf('-');
                if (dash < 0) {
                    return null;
                }
                return new ContentRange(Long.parseLong(r.substring(0, dash)), Long.parseLong(r.substring(dash + 1)), size);
            } catch (NumberFormatException e) {
                return null;
            }
        }
    }
}
