package io.tierd.kafka;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.apache.kafka.server.log.remote.storage.LogSegmentData;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata.CustomMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteStorageException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** copyLogSegmentData: the request sent (path, headers, body in both modes) and the custom metadata returned. */
class CopyTest {
    @TempDir
    Path tmp;
    FakeTierd fake;
    Map<String, Object> settings;

    @BeforeEach
    void start() throws Exception {
        fake = new FakeTierd(TestData.TOKEN);
        settings = TestData.settings(fake, TestData.tokenFile(tmp, TestData.TOKEN));
    }

    @AfterEach
    void stop() {
        fake.close();
    }

    private static Map<?, ?> json(FakeTierd.Request r) {
        return (Map<?, ?>) Json.parse(r.text());
    }

    @Test
    void pathModeSendsTheMetadataAndTheBrokersPaths() throws Exception {
        TestData.Segment s = TestData.segment(tmp, "orders", 0, 205, 5000, false, true);
        RemoteLogSegmentMetadata m = TestData.meta("orders", 0, 205, 5000);
        Optional<CustomMetadata> cm = TestData.rsm(settings).copyLogSegmentData(m, s.data());

        List<FakeTierd.Request> puts = fake.requests("PUT", "");
        assertEquals(1, puts.size());
        FakeTierd.Request r = puts.get(0);
        assertEquals("/v1/segments/orders/0/205/" + m.remoteLogSegmentId().id(), r.path);
        assertEquals(22, m.remoteLogSegmentId().id().toString().length());
        assertEquals("HTTP/1.1", r.protocol);
        assertEquals("Bearer " + TestData.TOKEN, r.header("Authorization"));
        assertEquals("application/json", r.header("Content-Type"));
        assertTrue(r.header("User-Agent").startsWith("tierd-kafka-rsm/1 (broker 1)"), r.header("User-Agent"));
        Map<?, ?> j = json(r);
        assertEquals("B3_HiNPgSQ6oxG9ZZ6ED5A", j.get("topicId"));
        assertEquals(304L, j.get("endOffset"));
        assertEquals(1_700_000_000_205L, j.get("maxTimestampMs"));
        assertEquals(1_700_000_001_000L, j.get("eventTimestampMs"));
        assertEquals(1L, j.get("brokerId"));
        assertEquals(5000L, j.get("segmentSizeInBytes"));
        assertEquals(List.of(Map.of("epoch", 0L, "startOffset", 205L), Map.of("epoch", 3L, "startOffset", 225L)),
                j.get("segmentLeaderEpochs"));
        assertEquals(s.log.toAbsolutePath().toString(), j.get("logSegment"));
        assertEquals(s.index.toAbsolutePath().toString(), j.get("offsetIndex"));
        assertEquals(s.timeIndex.toAbsolutePath().toString(), j.get("timeIndex"));
        assertTrue(j.containsKey("transactionIndex"));
        assertNull(j.get("transactionIndex"));
        assertEquals(s.snapshot.toAbsolutePath().toString(), j.get("producerSnapshot"));
        assertEquals("MAoyCjAgMAozIDEyMAo=", j.get("leaderEpochCheckpoint"), "the doc.go example, byte for byte");

        assertTrue(cm.isPresent());
        assertArrayEquals(new byte[] {0x74, 1, 2}, cm.get().value(), "'t', version 1, snapshot stored, no txn index");
        FakeTierd.Copy c = fake.copies.get(r.path);
        assertArrayEquals(Files.readAllBytes(s.log), c.objects.get("LOG"));
        assertArrayEquals(TestData.EPOCHS, c.objects.get("LEADER_EPOCH"));
    }

    @Test
    void customMetadataFlagsTheTransactionIndex() throws Exception {
        TestData.Segment s = TestData.segment(tmp, "orders", 1, 0, 300, true, true);
        Optional<CustomMetadata> cm = TestData.rsm(settings).copyLogSegmentData(TestData.meta("orders", 1, 0, 300), s.data());
        assertArrayEquals(new byte[] {0x74, 1, 3}, cm.get().value());
        assertEquals(s.txnIndex.toAbsolutePath().toString(), json(fake.requests("PUT", "").get(0)).get("transactionIndex"));
    }

    @Test
    void noCustomMetadataInTheAnswerIsEmpty() throws Exception {
        fake.hook = r -> new FakeTierd.Answer(200, "{\"bytes\": 300}");
        TestData.Segment s = TestData.segment(tmp, "orders", 1, 0, 300, false, true);
        assertFalse(TestData.rsm(settings).copyLogSegmentData(TestData.meta("orders", 1, 0, 300), s.data()).isPresent());
    }

    @Test
    void aMalformedAnswerIsAnError() throws Exception {
        fake.hook = r -> new FakeTierd.Answer(200, "{\"customMetadata\": 7");
        TestData.Segment s = TestData.segment(tmp, "orders", 1, 0, 300, false, true);
        RemoteStorageException e = assertThrows(RemoteStorageException.class,
                () -> TestData.rsm(settings).copyLogSegmentData(TestData.meta("orders", 1, 0, 300), s.data()));
        assertTrue(e.getMessage().contains("not the copy's JSON"), e.getMessage());
    }

    @Test
    void missingSnapshotFileIsSentAsNull() throws Exception {
        TestData.Segment s = TestData.segment(tmp, "orders", 2, 0, 300, false, false);
        Optional<CustomMetadata> cm = TestData.rsm(settings).copyLogSegmentData(TestData.meta("orders", 2, 0, 300), s.data());
        Map<?, ?> j = json(fake.requests("PUT", "").get(0));
        assertTrue(j.containsKey("producerSnapshot"));
        assertNull(j.get("producerSnapshot"));
        assertArrayEquals(new byte[] {0x74, 1, 0}, cm.get().value());
    }

    @Test
    void epochBufferIsSentFromItsPositionAndNotMoved() throws Exception {
        TestData.Segment s = TestData.segment(tmp, "orders", 0, 0, 100, false, true);
        byte[] framed = ("junk" + new String(TestData.EPOCHS, StandardCharsets.US_ASCII) + "tail")
                .getBytes(StandardCharsets.US_ASCII);
        ByteBuffer direct = ByteBuffer.allocateDirect(framed.length);
        direct.put(framed).position(4).limit(framed.length - 4);
        LogSegmentData d = new LogSegmentData(s.log, s.index, s.timeIndex, Optional.empty(), s.snapshot, direct);
        TestData.rsm(settings).copyLogSegmentData(TestData.meta("orders", 0, 0, 100), d);
        assertEquals(4, direct.position());
        assertEquals(framed.length - 4, direct.limit());
        String b64 = (String) json(fake.requests("PUT", "").get(0)).get("leaderEpochCheckpoint");
        assertArrayEquals(TestData.EPOCHS, Base64.getDecoder().decode(b64));
    }

    @Test
    void pathMapRewritesEveryPathByTheLongestPrefix() throws Exception {
        TestData.Segment s = TestData.segment(tmp.resolve("kafka/data"), "orders", 0, 0, 100, true, true);
        settings.put("tierd.path.map", tmp.resolve("kafka") + "=/mnt/other, " + tmp.resolve("kafka/data") + "=/mnt/broker-data");
        RemoteStorageException e = assertThrows(RemoteStorageException.class,
                () -> TestData.rsm(settings).copyLogSegmentData(TestData.meta("orders", 0, 0, 100), s.data()));
        assertTrue(e.getMessage().contains("403 PATH_NOT_ALLOWED"), e.getMessage());
        Map<?, ?> j = json(fake.requests("PUT", "").get(0));
        String n = "/mnt/broker-data/orders-0/00000000000000000000";
        assertEquals(n + ".log", j.get("logSegment"));
        assertEquals(n + ".index", j.get("offsetIndex"));
        assertEquals(n + ".timeindex", j.get("timeIndex"));
        assertEquals(n + ".txnindex", j.get("transactionIndex"));
        assertEquals("/mnt/broker-data/orders-0/00000000000000000100.snapshot", j.get("producerSnapshot"));
    }

    @Test
    void pathMapMatchesWholeComponentsOnly() {
        PathMap pm = PathMap.parse("/data=/x");
        assertEquals("/x/a/b.log", pm.apply(Path.of("/data/a/b.log")));
        assertEquals("/data2/a.log", pm.apply(Path.of("/data2/a.log")));
        assertThrows(IllegalArgumentException.class, () -> PathMap.parse("relative=/x"));
        assertThrows(IllegalArgumentException.class, () -> PathMap.parse("/a=/b=/c"));
        assertThrows(IllegalArgumentException.class, () -> PathMap.parse("/a"));
    }

    @Test
    void uploadModeFramesTheJsonThenTheFiles() throws Exception {
        settings.put("tierd.copy.mode", "upload");
        TestData.Segment s = TestData.segment(tmp, "orders", 0, 205, 70_000, true, true);
        RemoteLogSegmentMetadata m = TestData.meta("orders", 0, 205, 70_000);
        Optional<CustomMetadata> cm = TestData.rsm(settings).copyLogSegmentData(m, s.data());
        assertArrayEquals(new byte[] {0x74, 1, 3}, cm.get().value());

        FakeTierd.Request r = fake.requests("PUT", "").get(0);
        assertEquals("application/vnd.tierd.segment", r.header("Content-Type"));
        assertEquals(Integer.toString(r.body.length), r.header("Content-Length"), "a sized body, not chunks");
        ByteBuffer b = ByteBuffer.wrap(r.body);
        byte[] jb = new byte[b.getInt()];
        b.get(jb);
        Map<?, ?> j = (Map<?, ?>) Json.parse(new String(jb, StandardCharsets.UTF_8));
        assertFalse(j.containsKey("logSegment"), "paths are replaced by sizes");
        assertFalse(j.containsKey("transactionIndex"));
        assertEquals(70_000L, j.get("logSegmentBytes"));
        assertEquals(32L, j.get("offsetIndexBytes"));
        assertEquals(36L, j.get("timeIndexBytes"));
        assertEquals(68L, j.get("transactionIndexBytes"));
        assertEquals(40L, j.get("producerSnapshotBytes"));
        assertEquals("MAoyCjAgMAozIDEyMAo=", j.get("leaderEpochCheckpoint"));
        for (Path p : new Path[] {s.log, s.index, s.timeIndex, s.txnIndex, s.snapshot}) {
            byte[] want = Files.readAllBytes(p);
            byte[] got = new byte[want.length];
            b.get(got);
            assertArrayEquals(want, got, p.toString());
        }
        assertFalse(b.hasRemaining(), "nothing after the files");
    }

    @Test
    void uploadModeWithoutOptionalFilesSendsNoSizesForThem() throws Exception {
        settings.put("tierd.copy.mode", "upload");
        TestData.Segment s = TestData.segment(tmp, "orders", 0, 0, 100, false, false);
        assertArrayEquals(new byte[] {0x74, 1, 0},
                TestData.rsm(settings).copyLogSegmentData(TestData.meta("orders", 0, 0, 100), s.data()).get().value());
        String t = fake.requests("PUT", "").get(0).text();
        assertFalse(t.contains("transactionIndexBytes"));
        assertFalse(t.contains("producerSnapshotBytes"));
    }

    @Test
    void uploadOfAMissingFileFailsWithoutARequest() throws Exception {
        settings.put("tierd.copy.mode", "upload");
        TestData.Segment s = TestData.segment(tmp, "orders", 0, 0, 100, false, false);
        Files.delete(s.log);
        RemoteStorageException e = assertThrows(RemoteStorageException.class,
                () -> TestData.rsm(settings).copyLogSegmentData(TestData.meta("orders", 0, 0, 100), s.data()));
        assertTrue(e.getMessage().contains(s.log.toString()), e.getMessage());
        assertEquals(0, fake.requests.size());
    }

    @Test
    void aRetriedCopyWithANewSegmentIdIsANewCopy() throws Exception {
        TestData.Segment s = TestData.segment(tmp, "orders", 0, 0, 100, false, true);
        TierdRemoteStorageManager rsm = TestData.rsm(settings);
        RemoteLogSegmentMetadata a = TestData.meta("orders", 0, 0, 100);
        RemoteLogSegmentMetadata b = TestData.meta("orders", 0, 0, 100);
        rsm.copyLogSegmentData(a, s.data());
        rsm.copyLogSegmentData(a, s.data());
        rsm.copyLogSegmentData(b, s.data());
        assertEquals(2, fake.copies.size());
        assertEquals(3, fake.requests("PUT", "").size());
    }

    @Test
    void aTopicNameKafkaWouldRefuseIsNotSent() throws Exception {
        TestData.Segment s = TestData.segment(tmp, "orders", 0, 0, 100, false, true);
        RemoteStorageException e = assertThrows(RemoteStorageException.class,
                () -> TestData.rsm(settings).copyLogSegmentData(TestData.meta("a/b", 0, 0, 100), s.data()));
        assertTrue(e.getMessage().contains("not a Kafka topic name"), e.getMessage());
        assertEquals(0, fake.requests.size());
    }
}
