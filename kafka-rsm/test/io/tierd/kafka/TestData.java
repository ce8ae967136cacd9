package io.tierd.kafka;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.TreeMap;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.server.log.remote.storage.LogSegmentData;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentId;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata.CustomMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentState;

/**
 * Segment files and metadata for the plugin's unit tests. The bytes are
 * arbitrary (the fake sidecar does not parse them); tests on real broker
 * segments are the driver's (BrokerDriverTest).
 */
public final class TestData {
    public static final String TOKEN = "s3cr3t-t0ken-do-not-print";
    public static final Uuid TOPIC_ID = Uuid.fromString("B3_HiNPgSQ6oxG9ZZ6ED5A");
    /** The broker's epoch checkpoint text of the example in rsmapi/doc.go. */
    public static final byte[] EPOCHS = "0\n2\n0 0\n3 120\n".getBytes(StandardCharsets.US_ASCII);

    private TestData() {
    }

    /** A segment's files on disk. */
    public static final class Segment {
        public final Path dir;
        public final long base;
        public final Path log;
        public final Path index;
        public final Path timeIndex;
        public final Path txnIndex;
        public final Path snapshot;

        Segment(Path dir, long base, Path log, Path index, Path timeIndex, Path txnIndex, Path snapshot) {
            this.dir = dir;
            this.base = base;
            this.log = log;
            this.index = index;
            this.timeIndex = timeIndex;
            this.txnIndex = txnIndex;
            this.snapshot = snapshot;
        }

        /** @return LogSegmentData as the broker makes it, with {@link #EPOCHS} */
        public LogSegmentData data() {
            return new LogSegmentData(log, index, timeIndex, Optional.ofNullable(txnIndex), snapshot,
                    ByteBuffer.wrap(EPOCHS.clone()));
        }

        public byte[] bytes(Path p) throws IOException {
            return Files.readAllBytes(p);
        }
    }

    /** @return n pseudo-random bytes, the same for the same seed */
    public static byte[] random(int n, long seed) {
        byte[] b = new byte[n];
        new Random(seed).nextBytes(b);
        return b;
    }

    /**
     * Writes a segment's files in root/topic-partition.
     *
     * @param logBytes size of the .log
     * @param txn whether to write a .txnindex
     * @param snapshot whether to write the producer snapshot (else its path names a missing file)
     */
    public static Segment segment(Path root, String topic, int partition, long base, int logBytes, boolean txn,
                                  boolean snapshot) throws IOException {
        Path dir = Files.createDirectories(root.resolve(topic + "-" + partition));
        String n = String.format("%020d", base);
        Path log = Files.write(dir.resolve(n + ".log"), random(logBytes, base * 31 + logBytes));
        // Two real offset entries, then zero padding as a preallocated index has.
        ByteBuffer idx = ByteBuffer.allocate(8 * 4).putInt(3).putInt(100).putInt(7).putInt(900);
        Path index = Files.write(dir.resolve(n + ".index"), idx.array());
        ByteBuffer ti = ByteBuffer.allocate(12 * 3).putLong(1_700_000_000_000L).putInt(3);
        Path timeIndex = Files.write(dir.resolve(n + ".timeindex"), ti.array());
        Path txnIndex = txn ? Files.write(dir.resolve(n + ".txnindex"), random(34 * 2, base)) : null;
        Path snap = dir.resolve(String.format("%020d", base + 100) + ".snapshot");
        if (snapshot) {
            Files.write(snap, random(40, base + 7));
        }
        return new Segment(dir, base, log, index, timeIndex, txnIndex, snap);
    }

    /** @return a COPY_SEGMENT_STARTED metadata with a new segment id, epochs {0: base} */
    public static RemoteLogSegmentMetadata meta(String topic, int partition, long base, int size) {
        RemoteLogSegmentId id = RemoteLogSegmentId.generateNew(new TopicIdPartition(TOPIC_ID, partition, topic));
        Map<Integer, Long> epochs = new TreeMap<>();
        epochs.put(0, base);
        epochs.put(3, base + 20);
        return new RemoteLogSegmentMetadata(id, base, base + 99, 1_700_000_000_205L, 1, 1_700_000_001_000L, size, epochs);
    }

    /** @return meta as the broker holds it after the copy: COPY_SEGMENT_FINISHED with custom metadata */
    public static RemoteLogSegmentMetadata finished(RemoteLogSegmentMetadata m, Optional<CustomMetadata> cm) {
        return new RemoteLogSegmentMetadata(m.remoteLogSegmentId(), m.startOffset(), m.endOffset(), m.maxTimestampMs(),
                m.brokerId(), m.eventTimestampMs(), m.segmentSizeInBytes(), cm, RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
                m.segmentLeaderEpochs());
    }

    /** Writes the token file. */
    public static Path tokenFile(Path dir, String token) throws IOException {
        return Files.write(dir.resolve("token"), (token + "\n").getBytes(StandardCharsets.UTF_8));
    }

    /** @return the settings map the broker would pass, for this fake and token file */
    public static Map<String, Object> settings(FakeTierd fake, Path tokenFile) {
        Map<String, Object> m = new HashMap<>();
        m.put("tierd.endpoint", fake.endpoint());
        m.put("tierd.token.file", tokenFile.toString());
        m.put("tierd.request.timeout.ms", "10000");
        m.put("broker.id", 1);
        return m;
    }

    /** @return a configured plugin */
    public static TierdRemoteStorageManager rsm(Map<String, Object> settings) {
        TierdRemoteStorageManager r = new TierdRemoteStorageManager();
        r.configure(settings);
        return r;
    }

    /** @return the whole stream, closed */
    public static byte[] readAll(InputStream in) throws IOException {
        try (InputStream s = in) {
            return s.readAllBytes();
        }
    }
}
