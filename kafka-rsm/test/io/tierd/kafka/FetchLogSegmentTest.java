package io.tierd.kafka;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteResourceNotFoundException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** fetchLogSegment: inclusive positions, windows of ranged reads, streams left open. */
class FetchLogSegmentTest {
    static final int SIZE = 20_000;

    @TempDir
    Path tmp;
    FakeTierd fake;
    TierdRemoteStorageManager rsm;
    RemoteLogSegmentMetadata meta;
    byte[] log;

    @BeforeEach
    void start() throws Exception {
        fake = new FakeTierd(TestData.TOKEN);
        Map<String, Object> s = TestData.settings(fake, TestData.tokenFile(tmp, TestData.TOKEN));
        s.put("tierd.fetch.window.bytes", "1000");
        s.put("tierd.fetch.window.max.bytes", "4000");
        rsm = TestData.rsm(s);
        TestData.Segment seg = TestData.segment(tmp, "orders", 3, 500, SIZE, false, true);
        meta = TestData.meta("orders", 3, 500, SIZE);
        rsm.copyLogSegmentData(meta, seg.data());
        log = Files.readAllBytes(seg.log);
        fake.requests.clear();
    }

    @AfterEach
    void stop() {
        rsm.close();
        fake.close();
    }

    private List<String> ranges() {
        List<String> out = new ArrayList<>();
        for (FakeTierd.Request r : fake.requests("GET", "/log")) {
            out.add(r.header("Range"));
        }
        return out;
    }

    @Test
    void toTheEndInDoublingWindows() throws Exception {
        assertArrayEquals(log, TestData.readAll(rsm.fetchLogSegment(meta, 0)));
        assertEquals(List.of("bytes=0-999", "bytes=1000-2999", "bytes=3000-6999", "bytes=7000-10999",
                "bytes=11000-14999", "bytes=15000-18999", "bytes=19000-19999"), ranges());
        for (FakeTierd.Request r : fake.requests("GET", "/log")) {
            assertEquals("Bearer " + TestData.TOKEN, r.header("Authorization"));
            assertEquals("HTTP/1.1", r.protocol);
        }
    }

    @Test
    void startIsInclusive() throws Exception {
        assertArrayEquals(Arrays.copyOfRange(log, 12_345, SIZE), TestData.readAll(rsm.fetchLogSegment(meta, 12_345)));
        assertEquals("bytes=12345-13344", ranges().get(0));
    }

    @Test
    void startAndEndAreInclusive() throws Exception {
        assertArrayEquals(Arrays.copyOfRange(log, 10, 20), TestData.readAll(rsm.fetchLogSegment(meta, 10, 19)));
        assertArrayEquals(Arrays.copyOfRange(log, 0, 1), TestData.readAll(rsm.fetchLogSegment(meta, 0, 0)));
        assertArrayEquals(Arrays.copyOfRange(log, SIZE - 1, SIZE), TestData.readAll(rsm.fetchLogSegment(meta, SIZE - 1, SIZE - 1)));
        assertEquals(List.of("bytes=10-19", "bytes=0-0", "bytes=19999-19999"), ranges());
    }

    @Test
    void aRangeAcrossWindowsEndsAtItsEnd() throws Exception {
        assertArrayEquals(Arrays.copyOfRange(log, 100, 5101), TestData.readAll(rsm.fetchLogSegment(meta, 100, 5100)));
        assertEquals(List.of("bytes=100-1099", "bytes=1100-3099", "bytes=3100-5100"), ranges());
    }

    @Test
    void anEndPastTheSegmentStopsAtItsEnd() throws Exception {
        assertArrayEquals(Arrays.copyOfRange(log, 19_500, SIZE),
                TestData.readAll(rsm.fetchLogSegment(meta, 19_500, Integer.MAX_VALUE)));
        assertEquals(1, ranges().size(), "the size is known from the first answer: " + ranges());
    }

    @Test
    void aStartAtTheEndIsEmptyAndPastItIsAnError() throws Exception {
        assertEquals(0, TestData.readAll(rsm.fetchLogSegment(meta, SIZE)).length);
        RemoteStorageException e = assertThrows(RemoteStorageException.class, () -> rsm.fetchLogSegment(meta, SIZE + 1));
        assertTrue(e.getMessage().contains("416 RANGE_NOT_SATISFIABLE"), e.getMessage());
    }

    @Test
    void longOverloadsBehaveAsTheIntOnes() throws Exception {
        assertArrayEquals(Arrays.copyOfRange(log, 7, SIZE), TestData.readAll(rsm.fetchLogSegment(meta, 7L)));
        assertArrayEquals(Arrays.copyOfRange(log, 7, 8), TestData.readAll(rsm.fetchLogSegment(meta, 7L, 7L)));
        assertThrows(IllegalArgumentException.class, () -> rsm.fetchLogSegment(meta, -1L));
        assertThrows(IllegalArgumentException.class, () -> rsm.fetchLogSegment(meta, 5L, 4L));
    }

    @Test
    void badPositionsAreIllegalArguments() {
        // As Kafka's LocalTieredStorageTest asks of an RSM, without any request.
        assertThrows(IllegalArgumentException.class, () -> rsm.fetchLogSegment(meta, -1));
        assertThrows(IllegalArgumentException.class, () -> rsm.fetchLogSegment(meta, -1, Integer.MAX_VALUE));
        assertThrows(IllegalArgumentException.class, () -> rsm.fetchLogSegment(meta, 1, -1));
        assertThrows(IllegalArgumentException.class, () -> rsm.fetchLogSegment(meta, 2, 1));
        assertEquals(0, fake.requests.size());
    }

    @Test
    void theFirstWindowIsReadInTheCallSoAMissingCopyFailsIt() throws Exception {
        RemoteLogSegmentMetadata other = TestData.meta("orders", 3, 500, SIZE);
        assertThrows(RemoteResourceNotFoundException.class,
                () -> rsm.fetchLogSegment(other, 0));
        fake.requests.clear();
        InputStream in = rsm.fetchLogSegment(meta, 0);
        assertEquals(1, ranges().size(), "one window read before the first read()");
        in.close();
    }

    @Test
    void anAbandonedStreamHoldsOneWindowAndNoRequest() throws Exception {
        RangeInputStream in = (RangeInputStream) rsm.fetchLogSegment(meta, 0);
        assertEquals(log[0], (byte) in.read());
        assertEquals(1000, in.bufferedBytes());
        assertTrue(fake.settles(), "the window's answer was read whole: no exchange open");
        byte[] b = new byte[2500];
        int n = 0;
        while (n < b.length) {
            n += in.read(b, n, b.length - n);
        }
        assertTrue(in.bufferedBytes() <= 2000, "at most one window: " + in.bufferedBytes());
        assertTrue(fake.settles(), "no exchange open");
        assertEquals(2, ranges().size());
        // Dropped without close: nothing more is read.
        in = null;
        assertEquals(2, ranges().size());
    }

    @Test
    void manyAbandonedStreamsDoNotHoldTheServersOnlyThread() throws Exception {
        // One handler thread: a stream that held its answer open would starve every later call.
        try (FakeTierd one = new FakeTierd(TestData.TOKEN, 1, null)) {
            Map<String, Object> s = TestData.settings(one, TestData.tokenFile(tmp, TestData.TOKEN));
            s.put("tierd.request.timeout.ms", "5000");
            TierdRemoteStorageManager r = TestData.rsm(s);
            TestData.Segment seg = TestData.segment(tmp.resolve("big"), "orders", 0, 0, 4 << 20, false, true);
            RemoteLogSegmentMetadata m = TestData.meta("orders", 0, 0, 4 << 20);
            r.copyLogSegmentData(m, seg.data());
            List<InputStream> open = new ArrayList<>();
            for (int i = 0; i < 40; i++) {
                InputStream in = r.fetchLogSegment(m, i * 1000);
                assertEquals(Files.readAllBytes(seg.log)[i * 1000] & 0xff, in.read());
                open.add(in);
            }
            assertEquals(40, one.requests("GET", "/log").size());
            assertEquals(4 << 20, TestData.readAll(r.fetchLogSegment(m, 0)).length);
            assertTrue(one.settles(), "no exchange open");
            r.close();
            assertEquals(40, open.size());
        }
    }

    @Test
    void readAfterCloseFailsAndCloseWastesAtMostOneWindow() throws Exception {
        InputStream in = rsm.fetchLogSegment(meta, 0);
        in.read(new byte[10]);
        in.close();
        assertThrows(IOException.class, in::read);
        assertEquals(1, ranges().size());
    }

    @Test
    void skipMovesWithoutReadingTheSkippedWindows() throws Exception {
        InputStream in = rsm.fetchLogSegment(meta, 0);
        assertEquals(15_000, in.skip(15_000));
        byte[] rest = in.readAllBytes();
        assertArrayEquals(Arrays.copyOfRange(log, 15_000, SIZE), rest);
        assertEquals("bytes=15000-16999", ranges().get(1), ranges().toString());
        assertEquals(0, in.skip(10));
    }

    @Test
    void aCopyDeletedMidStreamFailsTheNextWindowWithIOException() throws Exception {
        InputStream in = rsm.fetchLogSegment(meta, 0);
        in.read(new byte[1000]);
        rsm.deleteLogSegmentData(meta);
        IOException e = assertThrows(IOException.class, in::read);
        assertTrue(e.getMessage().contains("404"), e.getMessage());
    }

    @Test
    void aCopyReplacedMidStreamByAnotherSizeFailsTheRead() throws Exception {
        InputStream in = rsm.fetchLogSegment(meta, 0);
        in.read(new byte[1000]);
        FakeTierd.Copy c = fake.copies.values().iterator().next();
        c.objects.put("LOG", Arrays.copyOf(log, SIZE - 1));
        IOException e = assertThrows(IOException.class, in::read);
        assertTrue(e.getMessage().contains("changed during the read"), e.getMessage());
    }

    @Test
    void aShortAnswerIsRefused() throws Exception {
        fake.hook = r -> r.method.equals("GET") ? new FakeTierd.Answer(200, "whole object") : null;
        RemoteStorageException e = assertThrows(RemoteStorageException.class, () -> rsm.fetchLogSegment(meta, 0));
        assertTrue(e.getMessage().contains("answers 206"), e.getMessage());
    }
}
