package io.tierd.kafka;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.SequenceInputStream;
import java.net.http.HttpRequest;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.Enumeration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Flow;
import org.apache.kafka.server.log.remote.storage.LogSegmentData;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteStorageException;

/**
 * The body of a copy, {@code PUT C} (rsmapi/doc.go, "Copy"). By path: JSON with
 * the metadata and the broker's file paths after {@code tierd.path.map}. By
 * upload: a 4-byte big-endian length n, n bytes of the same JSON with each path
 * replaced by the file's size ({@code logSegmentBytes} ...), then the files'
 * bytes in the order .log, .index, .timeindex, .txnindex, producer snapshot.
 *
 * <p>The transaction index and the producer snapshot are sent only when their
 * file exists on the broker's disk (the broker names a .txnindex only if it
 * exists; a producer snapshot path may name a file that does not). The leader
 * epoch buffer is read without moving its position and sent byte for byte as
 * base64.
 */
final class CopyRequest {
    /** Content type of a copy by path. */
    static final String JSON = "application/json";
    /** Content type of a copy by upload. */
    static final String SEGMENT = "application/vnd.tierd.segment";

    final String contentType;
    final HttpRequest.BodyPublisher body;
    /** The upload bodies made so far (one per send), closed by {@link #close}. */
    private final List<UploadBody> opened = new ArrayList<>();

    private CopyRequest(String contentType, HttpRequest.BodyPublisher body) {
        this.contentType = contentType;
        this.body = body;
    }

    private CopyRequest(List<Path> files, List<Long> sizes, byte[] head, long total) {
        this.contentType = SEGMENT;
        HttpRequest.BodyPublisher stream = HttpRequest.BodyPublishers.ofInputStream(() -> {
            UploadBody b = new UploadBody(head, files, sizes);
            synchronized (opened) {
                opened.add(b);
            }
            return b;
        });
        this.body = new SizedPublisher(stream, total);
    }

    /**
     * Closes every file an upload body opened. The HTTP client closes a body it
     * read to its end, but not one whose exchange ended early (a timeout, an
     * answer before the whole body was sent): that one would hold a broker's file
     * open, after the call, until the garbage collector found it.
     */
    void close() {
        synchronized (opened) {
            for (UploadBody b : opened) {
                b.closeFiles();
            }
            opened.clear();
        }
    }

    /**
     * @param meta the copy's metadata
     * @param data the broker's files
     * @param s the settings (path map, copy mode)
     * @param what the call, for messages
     * @return the request body
     * @throws RemoteStorageException when a file to upload cannot be read
     */
    static CopyRequest of(RemoteLogSegmentMetadata meta, LogSegmentData data, Settings s, String what)
            throws RemoteStorageException {
        Path txn = data.transactionIndex().filter(Files::exists).orElse(null);
        Path snap = data.producerSnapshotIndex() != null && Files.exists(data.producerSnapshotIndex())
                ? data.producerSnapshotIndex() : null;
        Json.ObjectWriter w = new Json.ObjectWriter()
                .put("topicId", meta.topicIdPartition().topicId().toString())
                .put("endOffset", meta.endOffset())
                .put("maxTimestampMs", meta.maxTimestampMs())
                .put("eventTimestampMs", meta.eventTimestampMs())
                .put("brokerId", meta.brokerId())
                .put("segmentSizeInBytes", meta.segmentSizeInBytes())
                .putRaw("segmentLeaderEpochs", epochs(meta.segmentLeaderEpochs()));
        if (s.copyMode == Settings.CopyMode.PATH) {
            PathMap pm = s.pathMap;
            w.put("logSegment", pm.apply(data.logSegment()))
                    .put("offsetIndex", pm.apply(data.offsetIndex()))
                    .put("timeIndex", pm.apply(data.timeIndex()))
                    .put("transactionIndex", txn == null ? null : pm.apply(txn))
                    .put("producerSnapshot", snap == null ? null : pm.apply(snap))
                    .put("leaderEpochCheckpoint", epochCheckpoint(data.leaderEpochIndex()));
            return new CopyRequest(JSON, HttpRequest.BodyPublishers.ofString(w.end(), StandardCharsets.UTF_8));
        }
        List<Path> files = new ArrayList<>();
        List<Long> sizes = new ArrayList<>();
        w.put("logSegmentBytes", add(files, sizes, data.logSegment(), what))
                .put("offsetIndexBytes", add(files, sizes, data.offsetIndex(), what))
                .put("timeIndexBytes", add(files, sizes, data.timeIndex(), what));
        if (txn != null) {
            w.put("transactionIndexBytes", add(files, sizes, txn, what));
        }
        if (snap != null) {
            w.put("producerSnapshotBytes", add(files, sizes, snap, what));
        }
        w.put("leaderEpochCheckpoint", epochCheckpoint(data.leaderEpochIndex()));
        byte[] json = w.end().getBytes(StandardCharsets.UTF_8);
        byte[] head = ByteBuffer.allocate(4 + json.length).putInt(json.length).put(json).array();
        long total = head.length;
        for (long n : sizes) {
            total += n;
        }
        return new CopyRequest(files, sizes, head, total);
    }

    private static long add(List<Path> files, List<Long> sizes, Path p, String what) throws RemoteStorageException {
        try {
            long n = Files.size(p);
            files.add(p);
            sizes.add(n);
            return n;
        } catch (IOException e) {
            throw new RemoteStorageException(what + ": cannot read " + p + " to upload it: " + e, e);
        }
    }

    /** @return [{"epoch": e, "startOffset": o}, ...] in epoch order */
    static String epochs(Map<Integer, Long> m) {
        StringBuilder sb = new StringBuilder("[");
        for (Map.Entry<Integer, Long> e : m.entrySet()) {
            if (sb.length() > 1) {
                sb.append(',');
            }
            sb.append(new Json.ObjectWriter().put("epoch", e.getKey()).put("startOffset", e.getValue()).end());
        }
        return sb.append(']').toString();
    }

    /** @return the base64 of the buffer's remaining bytes; the buffer itself is not moved */
    static String epochCheckpoint(ByteBuffer b) {
        ByteBuffer d = b.duplicate();
        byte[] raw = new byte[d.remaining()];
        d.get(raw);
        return Base64.getEncoder().encodeToString(raw);
    }

    /** A body publisher with a known length, so the request has Content-Length, not chunks. */
    private static final class SizedPublisher implements HttpRequest.BodyPublisher {
        private final HttpRequest.BodyPublisher inner;
        private final long length;

        SizedPublisher(HttpRequest.BodyPublisher inner, long length) {
            this.inner = inner;
            this.length = length;
        }

        @Override
        public long contentLength() {
            return length;
        }

        @Override
        public void subscribe(Flow.Subscriber<? super ByteBuffer> subscriber) {
            inner.subscribe(subscriber);
        }
    }

    /**
     * The upload body: the framed JSON, then exactly the stated number of bytes of
     * each file (a file found shorter than its stated size fails the copy).
     */
    private static final class UploadBody extends SequenceInputStream {
        private final List<ExactFile> files;

        private UploadBody(byte[] head, List<ExactFile> files) {
            super(parts(head, files));
            this.files = files;
        }

        UploadBody(byte[] head, List<Path> paths, List<Long> sizes) {
            this(head, exact(paths, sizes));
        }

        private static List<ExactFile> exact(List<Path> paths, List<Long> sizes) {
            List<ExactFile> l = new ArrayList<>();
            for (int i = 0; i < paths.size(); i++) {
                l.add(new ExactFile(paths.get(i), sizes.get(i)));
            }
            return l;
        }

        private static Enumeration<InputStream> parts(byte[] head, List<ExactFile> files) {
            List<InputStream> l = new ArrayList<>();
            l.add(new ByteArrayInputStream(head));
            l.addAll(files);
            return Collections.enumeration(l);
        }

        /** Closes the files, whichever thread reads the body: a read after it fails. */
        void closeFiles() {
            for (ExactFile f : files) {
                f.close();
            }
        }
    }

    /**
     * Exactly n bytes of a file, opened on first read; once closed (by the HTTP
     * client at its end, or by {@link CopyRequest#close} from the caller's
     * thread), it never opens the file again.
     */
    private static final class ExactFile extends InputStream {
        private final Path path;
        private final long size;
        private InputStream in;
        private long left;
        private boolean closed;

        ExactFile(Path path, long size) {
            this.path = path;
            this.size = size;
            this.left = size;
        }

        private InputStream in() throws IOException {
            if (closed) {
                throw new IOException(path + ": the upload was closed");
            }
            if (in == null) {
                in = Files.newInputStream(path);
            }
            return in;
        }

        @Override
        public synchronized int read() throws IOException {
            byte[] one = new byte[1];
            int n = read(one, 0, 1);
            return n < 0 ? -1 : one[0] & 0xff;
        }

        @Override
        public synchronized int read(byte[] b, int off, int len) throws IOException {
            if (left == 0) {
                close();
                return -1;
            }
            int n = in().read(b, off, (int) Math.min(len, left));
            if (n < 0) {
                throw new IOException(path + " ended after " + (size - left) + " of its " + size + " bytes");
            }
            left -= n;
            return n;
        }

        @Override
        public synchronized void close() {
            closed = true;
            if (in != null) {
                try {
                    in.close();
                } catch (IOException e) {
                    // A file that does not close is closed.
                }
                in = null;
            }
        }
    }
}
