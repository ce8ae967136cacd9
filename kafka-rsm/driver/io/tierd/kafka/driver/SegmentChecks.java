package io.tierd.kafka.driver;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.List;
import java.util.Optional;
import java.util.TreeSet;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata.CustomMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteResourceNotFoundException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageManager;
import org.apache.kafka.server.log.remote.storage.RemoteStorageManager.IndexType;

/**
 * The checks the driver makes through the plugin, each in the order and the way
 * the broker calls it: copy; the remote index cache's three fetchIndex calls at
 * once (RemoteIndexCache.createCacheEntry: OFFSET, TIMESTAMP, TRANSACTION, a
 * missing TRANSACTION read as an empty index); reads from position 0 and from
 * every offset-index entry's position up to a fetch size, closed after
 * (RemoteLogManager.read); ranged reads; LEADER_EPOCH and PRODUCER_SNAPSHOT
 * (a follower's TierStateMachine); delete twice; and not-found after delete.
 */
final class SegmentChecks {
    private final RemoteStorageManager rsm;
    private final Report rep;
    private final int fetchBytes;
    private final String tag;

    /**
     * @param fetchBytes how much a read takes before it closes the stream (the broker's fetch size), bytes
     * @param tag prefix of every check's name (empty, or a thread's tag)
     */
    SegmentChecks(RemoteStorageManager rsm, Report rep, int fetchBytes, String tag) {
        this.rsm = rsm;
        this.rep = rep;
        this.fetchBytes = fetchBytes;
        this.tag = tag;
    }

    private String what(String w, BrokerSegment s) {
        return tag + w + " " + s.name();
    }

    /**
     * Copies, and checks tierd's custom metadata (0x74, version 1, flags matching the files handed over).
     *
     * @return the metadata as the broker keeps it after the copy, or null when the copy failed
     */
    RemoteLogSegmentMetadata copy(BrokerSegment s, RemoteLogSegmentMetadata m, ByteBuffer epochs) {
        String w = what("copy", s);
        Optional<CustomMetadata> cm;
        try {
            cm = rsm.copyLogSegmentData(m, s.data(epochs.duplicate()));
        } catch (Exception e) {
            rep.fail(w, Report.describe(e));
            return null;
        }
        if (!cm.isPresent()) {
            rep.fail(w, "no custom metadata returned (tierd answers 3 bytes)");
            return null;
        }
        byte[] v = cm.get().value();
        long txnBytes = size(s.txnIndex);
        boolean ok = v.length == 3 && v[0] == 0x74 && v[1] == 1
                && (txnBytes == 0 || ((v[2] & 1) != 0) == (txnBytes > 0))
                && ((v[2] & 2) != 0) == s.hasSnapshot();
        rep.check(ok, w + " customMetadata " + Base64.getEncoder().encodeToString(v),
                "custom metadata " + Arrays.toString(v) + " is not 0x74, 1, flags (txn index " + (txnBytes < 0 ? "absent" : txnBytes + " bytes")
                        + ", snapshot " + (s.hasSnapshot() ? "present" : "absent") + ")");
        return BrokerSegment.finished(m, cm);
    }

    /** @return the file's size, or -1 when there is no file */
    private static long size(Path p) {
        try {
            return p == null ? -1 : Files.size(p);
        } catch (IOException e) {
            return -1;
        }
    }

    /** OFFSET, TIMESTAMP and TRANSACTION on three threads at once, as the broker's remote index cache fetches them. */
    void indexCache(BrokerSegment s, RemoteLogSegmentMetadata m) {
        IndexType[] types = {IndexType.OFFSET, IndexType.TIMESTAMP, IndexType.TRANSACTION};
        ExecutorService pool = Executors.newFixedThreadPool(types.length);
        CountDownLatch go = new CountDownLatch(1);
        List<Future<Object>> got = new ArrayList<>();
        try {
            for (IndexType t : types) {
                Callable<Object> c = () -> {
                    go.await();
                    try (InputStream in = rsm.fetchIndex(m, t)) {
                        return in.readAllBytes();
                    } catch (Exception e) {
                        return e;
                    }
                };
                got.add(pool.submit(c));
            }
            go.countDown();
            for (int i = 0; i < types.length; i++) {
                Object r;
                try {
                    r = got.get(i).get();
                } catch (Exception e) {
                    r = e;
                }
                checkIndex(s, types[i], r);
            }
        } finally {
            pool.shutdownNow();
        }
    }

    private void checkIndex(BrokerSegment s, IndexType t, Object r) {
        String w = what("index " + t, s);
        try {
            switch (t) {
                case OFFSET:
                    same(w, realEntries(s.index, 8), r);
                    break;
                case TIMESTAMP:
                    same(w, realEntries(s.timeIndex, 12), r);
                    break;
                case TRANSACTION:
                    long n = size(s.txnIndex);
                    if (n < 0) {
                        rep.check(r instanceof RemoteResourceNotFoundException, w + " not found (no .txnindex)",
                                "expected RemoteResourceNotFoundException, got " + describe(r));
                    } else if (n == 0) {
                        rep.check(r instanceof RemoteResourceNotFoundException || r instanceof byte[] && ((byte[]) r).length == 0,
                                w + " empty", "an empty .txnindex must read as not found or empty, got " + describe(r));
                    } else {
                        same(w, Files.readAllBytes(s.txnIndex), r);
                    }
                    break;
                default:
                    throw new IllegalArgumentException(t.toString());
            }
        } catch (IOException e) {
            rep.fail(w, "reading the broker's file: " + e);
        }
    }

    /** LEADER_EPOCH equal to the bytes the copy was given, PRODUCER_SNAPSHOT to the file (not found when there was none). */
    void auxState(BrokerSegment s, RemoteLogSegmentMetadata m, ByteBuffer epochs) {
        ByteBuffer d = epochs.duplicate();
        byte[] want = new byte[d.remaining()];
        d.get(want);
        same(what("index LEADER_EPOCH", s), want, fetchIndex(m, IndexType.LEADER_EPOCH));
        String w = what("index PRODUCER_SNAPSHOT", s);
        if (s.hasSnapshot()) {
            try {
                same(w, Files.readAllBytes(s.snapshot), fetchIndex(m, IndexType.PRODUCER_SNAPSHOT));
            } catch (IOException e) {
                rep.fail(w, "reading the broker's file: " + e);
            }
        } else {
            Object r = fetchIndex(m, IndexType.PRODUCER_SNAPSHOT);
            rep.check(r instanceof RemoteResourceNotFoundException, w + " not found (none handed over)",
                    "expected RemoteResourceNotFoundException, got " + describe(r));
        }
    }

    private Object fetchIndex(RemoteLogSegmentMetadata m, IndexType t) {
        try (InputStream in = rsm.fetchIndex(m, t)) {
            return in.readAllBytes();
        } catch (Exception e) {
            return e;
        }
    }

    /**
     * Reads from position 0 and every offset-index position, each up to the fetch
     * size and closed after; then ranged reads (inclusive ends, one past the end,
     * batch to batch); then a read at the end, which is empty.
     */
    void reads(BrokerSegment s, RemoteLogSegmentMetadata m) {
        String w = what("read", s);
        try (FileChannel f = FileChannel.open(s.log, StandardOpenOption.READ)) {
            long end = storedEnd(s, f);
            TreeSet<Long> positions = new TreeSet<>();
            positions.add(0L);
            ByteBuffer idx = ByteBuffer.wrap(realEntries(s.index, 8));
            while (idx.remaining() >= 8) {
                idx.getInt();
                long p = idx.getInt() & 0xffffffffL;
                if (p < end) {
                    positions.add(p);
                }
            }
            long compared = 0;
            for (long p : positions) {
                byte[] got;
                try (InputStream in = rsm.fetchLogSegment(m, (int) p)) {
                    got = readUpTo(in, fetchBytes);
                }
                byte[] want = slice(f, p, Math.min(end, p + fetchBytes));
                if (!Arrays.equals(want, got)) {
                    rep.fail(w, "from position " + p + ": " + diff(want, got));
                    return;
                }
                compared += got.length;
            }
            rep.ok(w + " from " + positions.size() + " positions (0 and the offset index's) up to " + fetchBytes
                    + " bytes each, " + compared + " bytes equal");

            List<long[]> ranges = new ArrayList<>();
            if (end > 0) {
                ranges.add(new long[] {0, 0});
                ranges.add(new long[] {0, end - 1});
                ranges.add(new long[] {end / 2, Math.min(end - 1, end / 2 + 99)});
                ranges.add(new long[] {end - 1, end + 1000});
                Long prev = null;
                for (long p : positions) {
                    if (prev != null) {
                        ranges.add(new long[] {prev, p - 1});
                    }
                    prev = p;
                }
            }
            for (long[] r : ranges) {
                byte[] got;
                try (InputStream in = rsm.fetchLogSegment(m, (int) r[0], (int) Math.min(r[1], Integer.MAX_VALUE))) {
                    got = in.readAllBytes();
                }
                byte[] want = slice(f, r[0], Math.min(end, r[1] + 1));
                if (!Arrays.equals(want, got)) {
                    rep.fail(what("range read", s), "[" + r[0] + ", " + r[1] + "]: " + diff(want, got));
                    return;
                }
            }
            rep.ok(what("range read", s) + " " + ranges.size() + " inclusive ranges equal");
            byte[] atEnd;
            try (InputStream in = rsm.fetchLogSegment(m, (int) end)) {
                atEnd = in.readAllBytes();
            }
            rep.check(atEnd.length == 0, what("read at the end", s) + " empty", "got " + atEnd.length + " bytes at position " + end);
        } catch (Exception e) {
            rep.fail(w, Report.describe(e));
        }
    }

    /**
     * @return the end of what tierd stores of the .log: the file's size, or the
     *     end of its last whole entry when everything after it is zero (a
     *     preallocated file's tail, which tierd leaves out)
     */
    private static long storedEnd(BrokerSegment s, FileChannel f) throws IOException {
        long valid = s.scan.validBytes;
        if (valid == s.fileSize) {
            return valid;
        }
        byte[] tail = slice(f, valid, s.fileSize);
        for (byte b : tail) {
            if (b != 0) {
                return s.fileSize;
            }
        }
        return valid;
    }

    /** After a failed copy the broker deletes that attempt (RemoteLogManager, KAFKA-17428). */
    void deleteFailedAttempt(BrokerSegment s, RemoteLogSegmentMetadata started) {
        try {
            rsm.deleteLogSegmentData(started);
            rep.ok(what("delete of the failed copy attempt", s));
        } catch (Exception e) {
            rep.fail(what("delete of the failed copy attempt", s), Report.describe(e));
        }
    }

    /** Deletes twice (idempotent), then expects every fetch of the copy to be not found. */
    void deleteTwiceThenMissing(BrokerSegment s, RemoteLogSegmentMetadata m) {
        for (String w : new String[] {"delete", "delete again"}) {
            try {
                rsm.deleteLogSegmentData(m);
                rep.ok(what(w, s));
            } catch (Exception e) {
                rep.fail(what(w, s), Report.describe(e));
            }
        }
        missing(s, m, "after delete ");
    }

    /** Every fetch of the copy must be RemoteResourceNotFoundException: the .log (from 0, and 0 to 0) and all five indexes. */
    void missing(BrokerSegment s, RemoteLogSegmentMetadata m, String prefix) {
        Object r;
        try (InputStream in = rsm.fetchLogSegment(m, 0)) {
            r = in;
        } catch (Exception e) {
            r = e;
        }
        notFound(what(prefix + "fetchLogSegment(0)", s), r);
        try (InputStream in = rsm.fetchLogSegment(m, 0, 0)) {
            r = in;
        } catch (Exception e) {
            r = e;
        }
        notFound(what(prefix + "fetchLogSegment(0, 0)", s), r);
        for (IndexType t : IndexType.values()) {
            notFound(what(prefix + "fetchIndex " + t, s), fetchIndex(m, t));
        }
    }

    private void notFound(String w, Object r) {
        rep.check(r instanceof RemoteResourceNotFoundException, w + " not found",
                "expected RemoteResourceNotFoundException, got " + describe(r));
    }

    private void same(String w, byte[] want, Object got) {
        if (got instanceof byte[] && Arrays.equals(want, (byte[]) got)) {
            rep.ok(w + " equal (" + want.length + " bytes)");
        } else {
            rep.fail(w, got instanceof byte[] ? diff(want, (byte[]) got) : describe(got));
        }
    }

    private static String describe(Object r) {
        if (r instanceof Throwable) {
            return Report.describe((Throwable) r);
        }
        if (r instanceof byte[]) {
            return ((byte[]) r).length + " bytes";
        }
        return "a stream";
    }

    /** @return "want N bytes, got M, first difference at byte K" */
    static String diff(byte[] want, byte[] got) {
        int n = Math.min(want.length, got.length);
        int i = 0;
        while (i < n && want[i] == got[i]) {
            i++;
        }
        return "want " + want.length + " bytes, got " + got.length + ", first difference at byte " + i;
    }

    /**
     * An index's real entries: the file without trailing all-zero entries (a
     * preallocated index's padding) or a partial entry; what tierd stores.
     */
    static byte[] realEntries(Path p, int entry) throws IOException {
        byte[] b = Files.readAllBytes(p);
        int n = b.length / entry;
        while (n > 0) {
            boolean zero = true;
            for (int i = (n - 1) * entry; i < n * entry && zero; i++) {
                zero = b[i] == 0;
            }
            if (!zero) {
                break;
            }
            n--;
        }
        return Arrays.copyOf(b, n * entry);
    }

    /** Reads until n bytes or the end of the stream, as the broker's Utils.readFully does. */
    static byte[] readUpTo(InputStream in, int n) throws IOException {
        byte[] b = new byte[n];
        int off = 0;
        while (off < n) {
            int r = in.read(b, off, n - off);
            if (r < 0) {
                break;
            }
            off += r;
        }
        return Arrays.copyOf(b, off);
    }

    static byte[] slice(FileChannel f, long from, long to) throws IOException {
        ByteBuffer b = ByteBuffer.allocate((int) Math.max(0, to - from));
        while (b.hasRemaining()) {
            if (f.read(b, from + b.position()) < 0) {
                break;
            }
        }
        return Arrays.copyOf(b.array(), b.position());
    }
}
