package io.tierd.kafka.driver;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.tierd.kafka.TestAccess;
import io.tierd.kafka.FakeTierd;
import io.tierd.kafka.TestData;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.apache.kafka.server.log.remote.storage.RemoteStorageManager;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The broker-order driver against the fake sidecar, on real broker segments
 * (../shared/fixtures/real, ldi-kafka370-kraft: a Kafka 3.7 __consumer_offsets
 * partition with its trimmed indexes and producer snapshot), whole and split
 * into two segments at a batch boundary.
 */
class BrokerDriverTest {
    static final String REAL = "ldi-kafka370-kraft/__consumer_offsets-6";
    static final String TOPIC_ID = "B3_HiNPgSQ6oxG9ZZ6ED5A";

    @TempDir
    Path tmp;
    FakeTierd fake;
    Path token;
    Path real;

    /** The fixture dir; skipped when absent, failed when absent on CI. */
    static Path fixture(String rel) {
        String dir = System.getProperty("tierd.fixtures", "");
        Path p = Paths.get(dir, rel);
        if (dir.isEmpty() || !Files.isDirectory(p)) {
            if (!System.getProperty("tierd.ci", "").isEmpty()) {
                fail("real fixtures not found at " + p + " (set TIERD_FIXTURES); CI requires them");
            }
            Assumptions.assumeTrue(false, "real fixtures not found at " + p + " (set TIERD_FIXTURES)");
        }
        return p;
    }

    @BeforeEach
    void start() throws Exception {
        real = fixture(REAL);
        fake = new FakeTierd(TestData.TOKEN);
        token = TestData.tokenFile(tmp, TestData.TOKEN);
    }

    @AfterEach
    void stop() {
        if (fake != null) {
            fake.close();
        }
    }

    /** The driver's exit code and output lines. */
    static final class Result {
        final int code;
        final List<String> lines;
        final String err;

        Result(int code, List<String> lines, String err) {
            this.code = code;
            this.lines = lines;
            this.err = err;
        }

        List<String> failures() {
            return lines.stream().filter(l -> l.startsWith("FAIL ")).collect(Collectors.toList());
        }

        boolean has(String line) {
            return lines.contains(line);
        }

        boolean hasPrefix(String prefix) {
            return lines.stream().anyMatch(l -> l.startsWith(prefix));
        }

        @Override
        public String toString() {
            return "exit " + code + "\n" + String.join("\n", lines) + "\n" + err;
        }
    }

    Result run(String command, Path dir, String... more) {
        List<String> args = new ArrayList<>(List.of(command, "--endpoint", fake.endpoint(), "--token-file", token.toString(),
                "--dir", dir.toString(), "--topic-id", TOPIC_ID));
        args.addAll(Arrays.asList(more));
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int code = BrokerDriver.run(args.toArray(new String[0]), new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8));
        return new Result(code, Arrays.asList(out.toString(StandardCharsets.UTF_8).split("\n")),
                err.toString(StandardCharsets.UTF_8));
    }

    private static Map<?, ?> json(FakeTierd.Request r) {
        return (Map<?, ?>) TestAccess.parseJson(r.text());
    }

    @Test
    void lifecycleOfARealSegment() throws Exception {
        Result r = run("lifecycle", real, "--all");
        assertEquals(0, r.code, r.toString());
        assertTrue(r.failures().isEmpty(), r.toString());
        String s = "__consumer_offsets-6@0";
        // 0x74, 1, flags 2: a producer snapshot and no transaction index.
        assertTrue(r.has("ok copy " + s + " customMetadata dAEC"), r.toString());
        assertTrue(r.has("ok index OFFSET " + s + " equal (16 bytes)"), r.toString());
        assertTrue(r.has("ok index TIMESTAMP " + s + " equal (36 bytes)"), r.toString());
        assertTrue(r.has("ok index TRANSACTION " + s + " not found (no .txnindex)"), r.toString());
        assertTrue(r.has("ok read " + s + " from 3 positions (0 and the offset index's) up to 1048576 bytes each, "
                + (13751 + (13751 - 4730) + (13751 - 9571)) + " bytes equal"), r.toString());
        assertTrue(r.hasPrefix("ok range read " + s + " "), r.toString());
        assertTrue(r.has("ok read at the end " + s + " empty"), r.toString());
        assertTrue(r.has("ok index LEADER_EPOCH " + s + " equal (8 bytes)"), r.toString());
        assertTrue(r.has("ok index PRODUCER_SNAPSHOT " + s + " equal (10 bytes)"), r.toString());
        assertTrue(r.has("ok delete " + s), r.toString());
        assertTrue(r.has("ok delete again " + s), r.toString());
        for (String t : new String[] {"fetchLogSegment(0)", "fetchLogSegment(0, 0)", "fetchIndex OFFSET", "fetchIndex TIMESTAMP",
            "fetchIndex PRODUCER_SNAPSHOT", "fetchIndex TRANSACTION", "fetchIndex LEADER_EPOCH"}) {
            assertTrue(r.has("ok after delete " + t + " " + s + " not found"), t + "\n" + r);
        }
        assertTrue(r.has("summary: " + (r.lines.size() - 1) + " ok, 0 failed"), r.toString());
        assertTrue(fake.copies.isEmpty());

        // The metadata as the broker builds it.
        Map<?, ?> j = json(fake.requests("PUT", "").get(0));
        assertEquals(12L, j.get("endOffset"), "the last offset found by scanning the batches");
        assertEquals(1_769_793_578_176L, j.get("maxTimestampMs"));
        assertEquals(13751L, j.get("segmentSizeInBytes"));
        assertEquals(List.of(Map.of("epoch", 0L, "startOffset", 0L)), j.get("segmentLeaderEpochs"));
        assertEquals(real.resolve("00000000000000000013.snapshot").toAbsolutePath().toString(), j.get("producerSnapshot"));
        assertEquals(Base64.getEncoder().encodeToString(Files.readAllBytes(real.resolve("leader-epoch-checkpoint"))),
                j.get("leaderEpochCheckpoint"));
        assertEquals(1L, j.get("brokerId"));
        // The broker's order: copy, then the index cache's three fetches, then reads.
        List<String> order = fake.requests.stream().map(q -> q.method + " " + q.path.replaceAll(".*/[A-Za-z0-9_-]{22}", ""))
                .collect(Collectors.toList());
        assertEquals("PUT ", order.get(0));
        assertEquals(List.of("GET /index/OFFSET", "GET /index/TIMESTAMP"), order.subList(1, 3).stream().sorted()
                .collect(Collectors.toList()), order.toString());
        assertEquals("GET /log", order.get(3), order.toString());
    }

    @Test
    void rolledSegmentsOnlyUnlessAll() throws Exception {
        Result r = run("lifecycle", real);
        assertEquals(1, r.code, r.toString());
        assertTrue(r.failures().get(0).contains("no rolled segment"), r.toString());
        assertTrue(fake.requests.isEmpty());
    }

    /** The real log split at the batch of offset 7 (position 9571) into two segments, with a transaction index on the first. */
    Path split() throws Exception {
        Path d = Files.createDirectories(tmp.resolve("split-0"));
        byte[] log = Files.readAllBytes(real.resolve("00000000000000000000.log"));
        Files.write(d.resolve("00000000000000000000.log"), Arrays.copyOfRange(log, 0, 9571));
        Files.write(d.resolve("00000000000000000007.log"), Arrays.copyOfRange(log, 9571, log.length));
        Files.write(d.resolve("00000000000000000000.index"), ByteBuffer.allocate(8).putInt(3).putInt(4730).array());
        Files.write(d.resolve("00000000000000000007.index"), new byte[0]);
        ByteBuffer ti = ByteBuffer.wrap(Files.readAllBytes(real.resolve("00000000000000000000.timeindex")));
        Files.write(d.resolve("00000000000000000000.timeindex"), ByteBuffer.allocate(12).putLong(ti.getLong(0)).putInt(3).array());
        Files.write(d.resolve("00000000000000000007.timeindex"), ByteBuffer.allocate(24)
                .putLong(ti.getLong(12)).putInt(0).putLong(ti.getLong(24)).putInt(5).array());
        // One aborted-transaction entry (version, producer id, first, last, last stable offset).
        Files.write(d.resolve("00000000000000000000.txnindex"), ByteBuffer.allocate(34).putShort((short) 0).putLong(1)
                .putLong(1).putLong(2).putLong(0).array());
        Files.copy(real.resolve("00000000000000000013.snapshot"), d.resolve("00000000000000000013.snapshot"));
        Files.write(d.resolve("leader-epoch-checkpoint"), "0\n2\n0 0\n1 9\n".getBytes(StandardCharsets.US_ASCII));
        return d;
    }

    @Test
    void lifecycleOfSplitSegmentsAsTheBrokerBuildsThem() throws Exception {
        Path d = split();
        Result r = run("lifecycle", d, "--all", "--fetch-bytes", "1000");
        assertEquals(0, r.code, r.toString());
        assertTrue(r.has("ok copy split-0@0 customMetadata dAED"), r.toString());
        assertTrue(r.has("ok index TRANSACTION split-0@0 equal (34 bytes)"), r.toString());
        assertTrue(r.has("ok copy split-0@7 customMetadata dAEC"), r.toString());
        assertTrue(r.has("ok index TRANSACTION split-0@7 not found (no .txnindex)"), r.toString());
        assertTrue(r.has("ok lifecycle split-0 2 segment(s)"), r.toString());

        List<FakeTierd.Request> puts = fake.requests("PUT", "");
        Map<?, ?> a = json(puts.get(0));
        Map<?, ?> b = json(puts.get(1));
        assertEquals(6L, a.get("endOffset"));
        assertEquals(1_769_792_038_081L, a.get("maxTimestampMs"));
        assertEquals(List.of(Map.of("epoch", 0L, "startOffset", 0L)), a.get("segmentLeaderEpochs"));
        assertEquals(b64("0\n1\n0 0\n"), a.get("leaderEpochCheckpoint"), "the epochs before the next segment");
        assertEquals(12L, b.get("endOffset"));
        assertEquals(List.of(Map.of("epoch", 0L, "startOffset", 7L), Map.of("epoch", 1L, "startOffset", 9L)),
                b.get("segmentLeaderEpochs"), "the epoch open at the base offset moved to it");
        assertEquals(b64("0\n2\n0 0\n1 9\n"), b.get("leaderEpochCheckpoint"));
        assertEquals(d.resolve("00000000000000000013.snapshot").toAbsolutePath().toString(), a.get("producerSnapshot"),
                "no snapshot at 7: the newest");
        assertFalse(a.get("transactionIndex") == null);
        assertEquals(null, b.get("transactionIndex"));
    }

    private static String b64(String s) {
        return Base64.getEncoder().encodeToString(s.getBytes(StandardCharsets.US_ASCII));
    }

    @Test
    void concurrentCopiesOnThirtyTwoThreads() throws Exception {
        Result r = run("concurrent", split(), "--all", "--threads", "32");
        assertEquals(0, r.code, r.toString());
        assertEquals(32, r.lines.stream().filter(l -> l.matches("ok \\[t\\d\\d\\] delete again split-0@\\d+")).count(), r.toString());
        assertEquals(32, fake.requests("PUT", "").size());
        assertTrue(fake.copies.isEmpty());
    }

    @Test
    void singleStepsForFaultTests() throws Exception {
        String id = "AAAAAAAAAAAAAAAAAAAAAQ";
        Result c = run("copy", real, "--base", "0", "--segment-id", id);
        assertEquals(0, c.code, c.toString());
        assertTrue(c.has("copied dAEC"), c.toString());
        assertTrue(c.has("ok copy __consumer_offsets-6@0 expecting ok"), c.toString());
        assertTrue(fake.copies.containsKey("/v1/segments/__consumer_offsets/6/0/" + id));

        Result k = run("check", real, "--base", "0", "--segment-id", id, "--custom-metadata", "dAEC");
        assertEquals(0, k.code, k.toString());
        assertTrue(k.has("ok index TRANSACTION __consumer_offsets-6@0 not found (no .txnindex)"), k.toString());
        assertEquals(0, fake.requests("GET", "/index/TRANSACTION").size(), "answered from the custom metadata");

        Result d = run("delete", real, "--base", "0", "--segment-id", id);
        assertEquals(0, d.code, d.toString());
        assertTrue(d.has("deleted"), d.toString());
        Result m = run("missing", real, "--base", "0", "--segment-id", id);
        assertEquals(0, m.code, m.toString());
        assertEquals(7, m.lines.stream().filter(l -> l.startsWith("ok ") && l.endsWith(" not found")).count(), m.toString());
        assertEquals(1, fake.requests("GET", "/index/TRANSACTION").size(), "asked tierd: no custom metadata given");

        Result again = run("check", real, "--base", "0", "--segment-id", id);
        assertEquals(1, again.code, "the read checks of a deleted copy fail: " + again);
    }

    @Test
    void expectationsOfFaults() throws Exception {
        String id = "AAAAAAAAAAAAAAAAAAAAAg";
        fake.hook = q -> FakeTierd.Answer.error(503, "UNAVAILABLE", "rsm: object store does not answer");
        Result r = run("copy", real, "--base", "0", "--segment-id", id, "--expect", "retriable", "--expect-message", "UNAVAILABLE");
        assertEquals(0, r.code, r.toString());
        assertTrue(r.lines.get(0).startsWith("exception org.apache.kafka.server.log.remote.storage."), r.toString());
        assertTrue(r.hasPrefix("ok copy __consumer_offsets-6@0 expecting retriable"), r.toString());

        Result wrong = run("copy", real, "--base", "0", "--segment-id", id);
        assertEquals(1, wrong.code, wrong.toString());
        String got = TestAccess.retriableExpected() ? "retriable" : "error";
        assertTrue(wrong.failures().get(0).startsWith("FAIL copy __consumer_offsets-6@0 expecting ok: got " + got),
                wrong.toString());

        Result msg = run("copy", real, "--base", "0", "--segment-id", id, "--expect", "retriable", "--expect-message", "CORRUPT");
        assertEquals(1, msg.code, msg.toString());
        assertTrue(msg.failures().get(0).startsWith("FAIL copy __consumer_offsets-6@0 expecting retriable: expected a message"
                + " with \"CORRUPT\""), msg.toString());

        fake.hook = q -> FakeTierd.Answer.error(422, "CORRUPT_SEGMENT", "rsm: 00000000000000000000.log byte 1780: bad CRC");
        Result bad = run("copy", real, "--base", "0", "--segment-id", id, "--expect", "error", "--expect-message", "byte 1780");
        assertEquals(0, bad.code, bad.toString());
        fake.hook = q -> FakeTierd.Answer.error(500, "INTERNAL", "rsm: pebble: closed");
        assertEquals(0, run("delete", real, "--base", "0", "--segment-id", id, "--expect", "error").code);
    }

    @Test
    void aWrongAnswerFailsTheRun() throws Exception {
        fake.hook = q -> q.path.endsWith("/index/LEADER_EPOCH") && !fake.copies.isEmpty() ? new FakeTierd.Answer(200, "0\n1\n0 1\n") : null;
        Result r = run("lifecycle", real, "--all");
        assertEquals(1, r.code, r.toString());
        assertEquals(List.of("FAIL index LEADER_EPOCH __consumer_offsets-6@0: want 8 bytes, got 8, first difference at byte 6"),
                r.failures(), r.toString());
    }

    @Test
    void aFailedCopyIsDeletedAsTheBrokerDoes() throws Exception {
        fake.hook = q -> q.method.equals("PUT")
                ? FakeTierd.Answer.error(422, "CORRUPT_SEGMENT", "rsm: 00000000000000000000.log byte 1780: bad CRC") : null;
        Result r = run("lifecycle", real, "--all");
        assertEquals(1, r.code, r.toString());
        assertTrue(r.failures().get(0).startsWith("FAIL copy __consumer_offsets-6@0: org.apache.kafka.server.log.remote."
                + "storage.RemoteStorageException: copy of __consumer_offsets-6 segment 0"), r.toString());
        assertTrue(r.failures().get(0).endsWith("422 CORRUPT_SEGMENT: rsm: 00000000000000000000.log byte 1780: bad CRC"),
                r.toString());
        assertTrue(r.has("ok delete of the failed copy attempt __consumer_offsets-6@0"), r.toString());
        String put = fake.requests("PUT", "").get(0).path;
        assertEquals(List.of(put), fake.requests("DELETE", "").stream().map(q -> q.path).collect(Collectors.toList()),
                "the same attempt's segment id");
    }

    @Test
    void lifecycleByUpload() throws Exception {
        Result r = run("lifecycle", split(), "--all", "--set", "tierd.copy.mode=upload");
        assertEquals(0, r.code, r.toString());
        assertEquals(List.of("application/vnd.tierd.segment", "application/vnd.tierd.segment"),
                fake.requests("PUT", "").stream().map(q -> q.header("Content-Type")).collect(Collectors.toList()));
    }

    @Test
    void usageErrorsExitTwo() {
        assertEquals(2, run("copy", real).code, "copy needs --base and --segment-id");
        assertEquals(2, run("lifecycle", real, "--threads", "x").code);
        assertEquals(2, run("nonsense", real).code);
        assertEquals(2, run("copy", real, "--base", "0", "--segment-id", "short").code);
    }

    @Test
    void thePluginLoadsChildFirstFromItsJar() throws Exception {
        Path jar = Paths.get(System.getProperty("tierd.bin", "bin"), "tierd-kafka-rsm.jar");
        Assumptions.assumeTrue(Files.exists(jar), "no " + jar);
        RemoteStorageManager rsm = PluginLoader.load("io.tierd.kafka.TierdRemoteStorageManager", jar,
                Map.of("tierd.token.file", token.toString(), "tierd.endpoint", fake.endpoint(), "broker.id", 3));
        assertNotSame(PluginLoader.class.getClassLoader(), rsm.getClass().getClassLoader());
        assertEquals(RemoteStorageManager.class, rsm.getClass().getInterfaces()[0], "the broker's type, not a bundled copy");
        rsm.close();
        Result r = run("lifecycle", real, "--all", "--plugin-jar", jar.toString(), "--broker-id", "3");
        assertEquals(0, r.code, r.toString());
        assertTrue(fake.requests.get(0).header("User-Agent").endsWith("(broker 3)"));
    }
}
