package io.tierd.kafka;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata.CustomMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentState;
import org.apache.kafka.server.log.remote.storage.RemoteResourceNotFoundException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageManager.IndexType;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** fetchIndex: the five index types, whole in memory; a missing transaction index, known locally or from tierd. */
class FetchIndexTest {
    @TempDir
    Path tmp;
    FakeTierd fake;
    TierdRemoteStorageManager rsm;

    @BeforeEach
    void start() throws Exception {
        fake = new FakeTierd(TestData.TOKEN);
        rsm = TestData.rsm(TestData.settings(fake, TestData.tokenFile(tmp, TestData.TOKEN)));
    }

    @AfterEach
    void stop() {
        rsm.close();
        fake.close();
    }

    private static byte[] read(InputStream in) throws Exception {
        assertTrue(in instanceof ByteArrayInputStream, "an index is read whole: " + in.getClass());
        return TestData.readAll(in);
    }

    @Test
    void everyTypeIsTheStoredObject() throws Exception {
        TestData.Segment s = TestData.segment(tmp, "orders", 0, 40, 300, true, true);
        RemoteLogSegmentMetadata m = TestData.meta("orders", 0, 40, 300);
        Optional<CustomMetadata> cm = rsm.copyLogSegmentData(m, s.data());
        RemoteLogSegmentMetadata done = TestData.finished(m, cm);
        assertArrayEquals(Arrays.copyOf(Files.readAllBytes(s.index), 16), read(rsm.fetchIndex(done, IndexType.OFFSET)),
                "the real entries, padding cut");
        assertArrayEquals(Arrays.copyOf(Files.readAllBytes(s.timeIndex), 12), read(rsm.fetchIndex(done, IndexType.TIMESTAMP)));
        assertArrayEquals(Files.readAllBytes(s.txnIndex), read(rsm.fetchIndex(done, IndexType.TRANSACTION)));
        assertArrayEquals(Files.readAllBytes(s.snapshot), read(rsm.fetchIndex(done, IndexType.PRODUCER_SNAPSHOT)));
        assertArrayEquals(TestData.EPOCHS, read(rsm.fetchIndex(done, IndexType.LEADER_EPOCH)));
        for (IndexType t : IndexType.values()) {
            assertEquals(1, fake.requests("GET", "/index/" + t.name()).size(), t.name());
        }
        String path = fake.requests("GET", "/index/OFFSET").get(0).path;
        assertEquals("/v1/segments/orders/0/40/" + m.remoteLogSegmentId().id() + "/index/OFFSET", path);
    }

    @Test
    void noTransactionIndexByTheCustomMetadataIsAnsweredLocally() throws Exception {
        TestData.Segment s = TestData.segment(tmp, "orders", 0, 0, 300, false, true);
        RemoteLogSegmentMetadata m = TestData.meta("orders", 0, 0, 300);
        RemoteLogSegmentMetadata done = TestData.finished(m, rsm.copyLogSegmentData(m, s.data()));
        assertArrayEquals(new byte[] {0x74, 1, 2}, done.customMetadata().get().value());
        assertThrows(RemoteResourceNotFoundException.class, () -> rsm.fetchIndex(done, IndexType.TRANSACTION));
        assertEquals(0, fake.requests("GET", "/index/TRANSACTION").size(), "no round trip");
    }

    @Test
    void noTransactionIndexWithoutCustomMetadataIsTierds404() throws Exception {
        TestData.Segment s = TestData.segment(tmp, "orders", 0, 0, 300, false, true);
        RemoteLogSegmentMetadata m = TestData.meta("orders", 0, 0, 300);
        rsm.copyLogSegmentData(m, s.data());
        RemoteResourceNotFoundException e = assertThrows(RemoteResourceNotFoundException.class,
                () -> rsm.fetchIndex(m, IndexType.TRANSACTION));
        assertTrue(e.getMessage().contains("404 NOT_FOUND"), e.getMessage());
        assertEquals(1, fake.requests("GET", "/index/TRANSACTION").size());
    }

    @Test
    void customMetadataNotOursIsIgnored() throws Exception {
        TestData.Segment s = TestData.segment(tmp, "orders", 0, 0, 300, true, true);
        RemoteLogSegmentMetadata m = TestData.meta("orders", 0, 0, 300);
        rsm.copyLogSegmentData(m, s.data());
        for (byte[] foreign : new byte[][] {{0x41, 1, 0}, {0x74, 2, 0}, {0x74, 1}, {}}) {
            RemoteLogSegmentMetadata other = TestData.finished(m, Optional.of(new CustomMetadata(foreign)));
            assertArrayEquals(Files.readAllBytes(s.txnIndex), read(rsm.fetchIndex(other, IndexType.TRANSACTION)));
        }
    }

    /** The metadata as Kafka 4.0+ has it, with isTxnIdxEmpty() (KAFKA-16780). */
    public static final class Kafka4Metadata extends RemoteLogSegmentMetadata {
        private final boolean txnIdxEmpty;

        Kafka4Metadata(RemoteLogSegmentMetadata m, boolean txnIdxEmpty) {
            super(m.remoteLogSegmentId(), m.startOffset(), m.endOffset(), m.maxTimestampMs(), m.brokerId(),
                    m.eventTimestampMs(), m.segmentSizeInBytes(), Optional.empty(), RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
                    m.segmentLeaderEpochs());
            this.txnIdxEmpty = txnIdxEmpty;
        }

        public boolean isTxnIdxEmpty() {
            return txnIdxEmpty;
        }
    }

    @Test
    void isTxnIdxEmptyOfNewerBrokersIsFoundByReflection() throws Exception {
        TestData.Segment s = TestData.segment(tmp, "orders", 0, 0, 300, true, true);
        RemoteLogSegmentMetadata m = TestData.meta("orders", 0, 0, 300);
        rsm.copyLogSegmentData(m, s.data());
        assertThrows(RemoteResourceNotFoundException.class, () -> rsm.fetchIndex(new Kafka4Metadata(m, true), IndexType.TRANSACTION));
        assertEquals(0, fake.requests("GET", "/index/TRANSACTION").size());
        assertArrayEquals(Files.readAllBytes(s.txnIndex),
                read(rsm.fetchIndex(new Kafka4Metadata(m, false), IndexType.TRANSACTION)));
        assertEquals(1, fake.requests("GET", "/index/TRANSACTION").size());
    }

    @Test
    void aMissingProducerSnapshotIsNotFound() throws Exception {
        TestData.Segment s = TestData.segment(tmp, "orders", 0, 0, 300, false, false);
        RemoteLogSegmentMetadata m = TestData.meta("orders", 0, 0, 300);
        RemoteLogSegmentMetadata done = TestData.finished(m, rsm.copyLogSegmentData(m, s.data()));
        assertThrows(RemoteResourceNotFoundException.class, () -> rsm.fetchIndex(done, IndexType.PRODUCER_SNAPSHOT));
    }

    @Test
    void everyFetchOfAnUnknownSegmentIsNotFound() throws Exception {
        // The intent of Kafka's LocalTieredStorageTest: each fetch of a segment never copied.
        RemoteLogSegmentMetadata m = TestData.meta("orders", 0, 0, 300);
        assertThrows(RemoteResourceNotFoundException.class, () -> rsm.fetchLogSegment(m, 0));
        assertThrows(RemoteResourceNotFoundException.class, () -> rsm.fetchLogSegment(m, 0, 10));
        assertThrows(RemoteResourceNotFoundException.class, () -> rsm.fetchLogSegment(m, 0L));
        for (IndexType t : IndexType.values()) {
            assertThrows(RemoteResourceNotFoundException.class, () -> rsm.fetchIndex(m, t), t.name());
        }
        assertEquals(3 + IndexType.values().length, fake.requests.size(), "each asked tierd");
    }

    @Test
    void theTokenGoesWithEveryRequest() throws Exception {
        RemoteLogSegmentMetadata m = TestData.meta("orders", 0, 0, 300);
        assertThrows(RemoteResourceNotFoundException.class, () -> rsm.fetchIndex(m, IndexType.OFFSET));
        Map<String, List<String>> h = fake.requests.get(0).headers;
        assertEquals(List.of("Bearer " + TestData.TOKEN), h.get("Authorization"));
    }
}
