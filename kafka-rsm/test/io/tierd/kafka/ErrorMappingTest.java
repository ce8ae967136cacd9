package io.tierd.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.InputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteResourceNotFoundException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageManager.IndexType;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The error table of rsmapi/doc.go, for every call. Run twice by build.sh: with
 * Kafka's RetriableRemoteStorageException on the class path (4.2+ brokers) and
 * without it (3.6-4.1), the run saying which in tierd.test.expectRetriable.
 */
class ErrorMappingTest {
    @TempDir
    Path tmp;
    FakeTierd fake;
    Map<String, Object> settings;
    TierdRemoteStorageManager rsm;
    TestData.Segment seg;
    RemoteLogSegmentMetadata meta;

    static boolean expectRetriable() {
        String p = System.getProperty("tierd.test.expectRetriable");
        if (p != null) {
            return Boolean.parseBoolean(p);
        }
        try {
            Class.forName(Errors.RETRIABLE_CLASS);
            return true;
        } catch (ClassNotFoundException e) {
            return false;
        }
    }

    /** Retriable as this class path allows: Kafka's class if there, else exactly RemoteStorageException. */
    static void assertRetriable(Throwable e) {
        if (expectRetriable()) {
            assertEquals(Errors.RETRIABLE_CLASS, e.getClass().getName(), e.toString());
        } else {
            assertEquals(RemoteStorageException.class, e.getClass(), e.toString());
        }
    }

    @BeforeEach
    void start() throws Exception {
        fake = new FakeTierd(TestData.TOKEN);
        settings = TestData.settings(fake, TestData.tokenFile(tmp, TestData.TOKEN));
        rsm = TestData.rsm(settings);
        seg = TestData.segment(tmp, "orders", 0, 0, 300, false, true);
        meta = TestData.meta("orders", 0, 0, 300);
    }

    @AfterEach
    void stop() {
        rsm.close();
        fake.close();
    }

    /** Every call, as an Executable. */
    Executable[] calls(TierdRemoteStorageManager r) {
        return new Executable[] {
            () -> r.copyLogSegmentData(meta, seg.data()),
            () -> r.fetchLogSegment(meta, 0),
            () -> r.fetchLogSegment(meta, 0, 10),
            () -> r.fetchIndex(meta, IndexType.OFFSET),
            () -> r.fetchIndex(meta, IndexType.TRANSACTION),
            () -> r.deleteLogSegmentData(meta),
        };
    }

    @Test
    void theClassPathIsAsThisRunSays() {
        assertEquals(expectRetriable(), Errors.retriableAvailable());
    }

    @ParameterizedTest
    @CsvSource({"429,TOO_MANY_COPIES", "503,UNAVAILABLE", "504,TIMEOUT"})
    void overloadedOrTimingOutIsRetriable(int status, String reason) throws Exception {
        fake.hook = r -> FakeTierd.Answer.error(status, reason, "rsm: store does not answer");
        for (Executable c : calls(rsm)) {
            RemoteStorageException e = assertThrows(RemoteStorageException.class, c);
            assertRetriable(e);
            assertTrue(e.getMessage().contains(status + " " + reason + ": rsm: store does not answer"), e.getMessage());
        }
    }

    @ParameterizedTest
    @CsvSource({"400,INVALID_ARGUMENT", "403,PATH_NOT_ALLOWED", "409,TIERED_BY_SIDECAR", "413,TOO_LARGE",
        "416,RANGE_NOT_SATISFIABLE", "422,CORRUPT_SEGMENT", "500,INTERNAL"})
    void otherFailuresCarryTierdsMessage(int status, String reason) throws Exception {
        String text = "rsm: copy of orders-0 segment 0: orders-0/00000000000000000000.log byte 4123: bad CRC";
        fake.hook = r -> FakeTierd.Answer.error(status, reason, text);
        for (Executable c : calls(rsm)) {
            RemoteStorageException e = assertThrows(RemoteStorageException.class, c);
            assertEquals(RemoteStorageException.class, e.getClass(), e.toString());
            assertTrue(e.getMessage().contains(status + " " + reason + ": " + text), e.getMessage());
            assertTrue(e.getMessage().contains("orders-0 segment 0 (id " + meta.remoteLogSegmentId().id() + ")"), e.getMessage());
        }
    }

    @Test
    void notFoundIsRemoteResourceNotFoundExceptionButDeleteSucceeds() {
        fake.hook = r -> FakeTierd.Answer.error(404, "NOT_FOUND", "rsm: no copy");
        Executable[] cs = calls(rsm);
        for (int i = 0; i < cs.length - 1; i++) {
            assertThrows(RemoteResourceNotFoundException.class, cs[i]);
        }
    }

    @Test
    void aBodyThatIsNotTierdsJsonIsShownCleaned() {
        fake.hook = r -> new FakeTierd.Answer(502, "<html>Bad\nGateway</html>");
        RemoteStorageException e = assertThrows(RemoteStorageException.class, () -> rsm.fetchIndex(meta, IndexType.OFFSET));
        assertTrue(e.getMessage().endsWith("tierd answered 502: <html>Bad Gateway</html>"), e.getMessage());
    }

    @Test
    void aRefusedConnectionIsRetriable() throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            port = s.getLocalPort();
        }
        settings.put("tierd.endpoint", "http://127.0.0.1:" + port);
        TierdRemoteStorageManager r = TestData.rsm(settings);
        for (Executable c : calls(r)) {
            RemoteStorageException e = assertThrows(RemoteStorageException.class, c);
            assertRetriable(e);
            assertTrue(e.getMessage().contains("cannot connect to tierd at http://127.0.0.1:" + port), e.getMessage());
        }
    }

    @Test
    void noAnswerWithinTheTimeoutIsRetriable() throws Exception {
        CountDownLatch release = new CountDownLatch(1);
        fake.hook = r -> {
            release.await(60, TimeUnit.SECONDS);
            return null;
        };
        settings.put("tierd.request.timeout.ms", "300");
        settings.put("tierd.copy.timeout.ms", "400");
        TierdRemoteStorageManager r = TestData.rsm(settings);
        try {
            Executable[] cs = calls(r);
            for (int i = 0; i < cs.length; i++) {
                RemoteStorageException e = assertThrows(RemoteStorageException.class, cs[i]);
                assertRetriable(e);
                String ms = i == 0 ? "400" : "300";
                assertTrue(e.getMessage().contains("tierd did not answer within " + ms + " ms"), e.getMessage());
            }
        } finally {
            release.countDown();
        }
    }

    @Test
    void aConnectionCutBeforeTheAnswerIsNotRetriable() throws Exception {
        // A tierd that dies mid-copy: the broker should delete that attempt, which it does for a plain error.
        try (ServerSocket s = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
            Thread t = new Thread(() -> {
                while (!s.isClosed()) {
                    try (Socket c = s.accept(); InputStream in = c.getInputStream()) {
                        in.read(new byte[64]);
                    } catch (Exception e) {
                        return;
                    }
                }
            });
            t.setDaemon(true);
            t.start();
            settings.put("tierd.endpoint", "http://127.0.0.1:" + s.getLocalPort());
            TierdRemoteStorageManager r = TestData.rsm(settings);
            RemoteStorageException e = assertThrows(RemoteStorageException.class, () -> r.copyLogSegmentData(meta, seg.data()));
            assertEquals(RemoteStorageException.class, e.getClass(), e.toString());
            assertTrue(e.getMessage().contains("exchange with tierd at http://127.0.0.1:" + s.getLocalPort() + " failed"),
                    e.getMessage());
        }
    }

    @Test
    void aRefusedTokenIsAnErrorThatDoesNotShowIt() throws Exception {
        fake.token = "another-token";
        for (Executable c : calls(rsm)) {
            RemoteStorageException e = assertThrows(RemoteStorageException.class, c);
            assertEquals(RemoteStorageException.class, e.getClass());
            assertTrue(e.getMessage().contains("401 UNAUTHENTICATED"), e.getMessage());
            assertFalse(e.getMessage().contains(TestData.TOKEN), e.getMessage());
            assertFalse(e.getMessage().contains("another-token"), e.getMessage());
        }
    }
}
