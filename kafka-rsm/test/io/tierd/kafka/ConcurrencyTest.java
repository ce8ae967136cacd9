package io.tierd.kafka;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteResourceNotFoundException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageManager.IndexType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** 32 callers at once on one plugin instance, as the broker's copy, expiration and reader pools are. */
class ConcurrencyTest {
    static final int CALLERS = 32;

    @TempDir
    Path tmp;

    @Test
    void thirtyTwoCallersCopyReadAndDeleteAtOnce() throws Exception {
        try (FakeTierd fake = new FakeTierd(TestData.TOKEN)) {
            Map<String, Object> s = TestData.settings(fake, TestData.tokenFile(tmp, TestData.TOKEN));
            s.put("tierd.fetch.window.bytes", "4096");
            s.put("tierd.fetch.window.max.bytes", "16384");
            TierdRemoteStorageManager rsm = TestData.rsm(s);
            // Every copy waits in the sidecar until all 32 are there: the plugin must not serialise them.
            CyclicBarrier allCopying = new CyclicBarrier(CALLERS);
            fake.hook = r -> {
                if (r.method.equals("PUT")) {
                    allCopying.await(60, TimeUnit.SECONDS);
                }
                return null;
            };
            ExecutorService pool = Executors.newFixedThreadPool(CALLERS);
            List<Future<?>> done = new ArrayList<>();
            for (int i = 0; i < CALLERS; i++) {
                int n = i;
                done.add(pool.submit(() -> {
                    TestData.Segment seg = TestData.segment(tmp.resolve("c" + n), "orders", n % 4, n * 1000L,
                            50_000 + n, n % 2 == 0, true);
                    RemoteLogSegmentMetadata m = TestData.meta("orders", n % 4, n * 1000L, 50_000 + n);
                    RemoteLogSegmentMetadata f = TestData.finished(m, rsm.copyLogSegmentData(m, seg.data()));
                    byte[] log = Files.readAllBytes(seg.log);
                    assertArrayEquals(log, TestData.readAll(rsm.fetchLogSegment(f, 0)));
                    try (InputStream in = rsm.fetchLogSegment(f, 1000 + n)) {
                        assertEquals(log[1000 + n] & 0xff, in.read());
                    }
                    assertArrayEquals(Arrays.copyOfRange(log, n, 2 * n + 1), TestData.readAll(rsm.fetchLogSegment(f, n, 2 * n)));
                    assertArrayEquals(TestData.EPOCHS, TestData.readAll(rsm.fetchIndex(f, IndexType.LEADER_EPOCH)));
                    if (n % 2 == 0) {
                        assertArrayEquals(Files.readAllBytes(seg.txnIndex), TestData.readAll(rsm.fetchIndex(f, IndexType.TRANSACTION)));
                    } else {
                        assertThrows(RemoteResourceNotFoundException.class, () -> rsm.fetchIndex(f, IndexType.TRANSACTION));
                    }
                    rsm.deleteLogSegmentData(f);
                    assertThrows(RemoteResourceNotFoundException.class, () -> rsm.fetchLogSegment(f, 0));
                    return null;
                }));
            }
            for (Future<?> d : done) {
                d.get(120, TimeUnit.SECONDS);
            }
            pool.shutdown();
            assertEquals(CALLERS, fake.requests("PUT", "").size());
            assertTrue(fake.copies.isEmpty(), "every copy deleted");
            rsm.close();
        }
    }
}
