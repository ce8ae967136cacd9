package io.tierd.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.InputStream;
import java.io.InterruptedIOException;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteStorageException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageManager.IndexType;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** An interrupted call (a task cancelled on a leadership change) throws and keeps the thread's interrupt flag. */
class InterruptTest {
    @TempDir
    Path tmp;
    FakeTierd fake;
    TierdRemoteStorageManager rsm;
    TestData.Segment seg;
    RemoteLogSegmentMetadata meta;

    @BeforeEach
    void start() throws Exception {
        fake = new FakeTierd(TestData.TOKEN);
        Map<String, Object> s = TestData.settings(fake, TestData.tokenFile(tmp, TestData.TOKEN));
        s.put("tierd.fetch.window.bytes", "1000");
        rsm = TestData.rsm(s);
        seg = TestData.segment(tmp, "orders", 0, 0, 5000, false, true);
        meta = TestData.meta("orders", 0, 0, 5000);
    }

    @AfterEach
    void stop() {
        Thread.interrupted();
        rsm.close();
        fake.close();
    }

    @Test
    void aCallOnAnInterruptedThreadFailsAndKeepsTheFlag() throws Exception {
        Thread.currentThread().interrupt();
        RemoteStorageException e = assertThrows(RemoteStorageException.class, () -> rsm.fetchIndex(meta, IndexType.OFFSET));
        assertTrue(Thread.interrupted(), "the flag is kept");
        assertTrue(e.getMessage().endsWith("interrupted"), e.getMessage());
        assertEquals(RemoteStorageException.class, e.getClass());
        assertEquals(0, fake.requests.size());
    }

    @Test
    void anInterruptDuringACopyEndsItAndKeepsTheFlag() throws Exception {
        CountDownLatch arrived = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        fake.hook = r -> {
            arrived.countDown();
            release.await(60, TimeUnit.SECONDS);
            return null;
        };
        CompletableFuture<Object[]> result = new CompletableFuture<>();
        Thread t = new Thread(() -> {
            try {
                rsm.copyLogSegmentData(meta, seg.data());
                result.complete(new Object[] {null, Thread.currentThread().isInterrupted()});
            } catch (Exception e) {
                result.complete(new Object[] {e, Thread.currentThread().isInterrupted()});
            }
        });
        t.start();
        try {
            assertTrue(arrived.await(30, TimeUnit.SECONDS), "the copy reached the sidecar");
            t.interrupt();
            Object[] r = result.get(30, TimeUnit.SECONDS);
            assertTrue(r[0] instanceof RemoteStorageException, String.valueOf(r[0]));
            assertTrue(((Exception) r[0]).getMessage().contains("copy of orders-0 segment 0"), ((Exception) r[0]).getMessage());
            assertTrue(((Exception) r[0]).getCause() instanceof InterruptedException);
            assertEquals(Boolean.TRUE, r[1], "the flag is kept");
        } finally {
            release.countDown();
        }
    }

    @Test
    void anInterruptBeforeTheNextWindowIsAnInterruptedIOException() throws Exception {
        rsm.copyLogSegmentData(meta, seg.data());
        InputStream in = rsm.fetchLogSegment(meta, 0);
        in.read(new byte[1000]);
        Thread.currentThread().interrupt();
        assertThrows(InterruptedIOException.class, in::read);
        assertTrue(Thread.interrupted());
    }
}
