package io.tierd.kafka;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteStorageManager;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The plugin jar, built against the Kafka 3.6 interface, called through the
 * newest interface shape (KIP-1333: long fetch overloads as default methods, int
 * overloads deprecated defaults that throw): every overload must reach the
 * plugin's own code, none the interface's defaults. Compiled and run against
 * that shape only (kafka-rsm/build.sh test, third run).
 */
class Kip1333LinkTest {
    @TempDir
    Path tmp;

    @Test
    @SuppressWarnings("deprecation")
    void everyOverloadReachesThePlugin() throws Exception {
        assertTrue(RemoteStorageManager.class.getMethod("fetchLogSegment", RemoteLogSegmentMetadata.class, long.class)
                .isDefault(), "this run must see the KIP-1333 interface shape");
        try (FakeTierd fake = new FakeTierd(TestData.TOKEN)) {
            RemoteStorageManager rsm = TestData.rsm(TestData.settings(fake, TestData.tokenFile(tmp, TestData.TOKEN)));
            TestData.Segment s = TestData.segment(tmp, "orders", 0, 0, 3000, false, true);
            RemoteLogSegmentMetadata m = TestData.meta("orders", 0, 0, 3000);
            rsm.copyLogSegmentData(m, s.data());
            byte[] log = Files.readAllBytes(s.log);
            assertArrayEquals(log, TestData.readAll(rsm.fetchLogSegment(m, 0L)));
            assertArrayEquals(Arrays.copyOfRange(log, 5, 10), TestData.readAll(rsm.fetchLogSegment(m, 5L, 9L)));
            assertArrayEquals(Arrays.copyOfRange(log, 7, 3000), TestData.readAll(rsm.fetchLogSegment(m, 7)));
            assertArrayEquals(Arrays.copyOfRange(log, 7, 9), TestData.readAll(rsm.fetchLogSegment(m, 7, 8)));
            // Positions past 2 GiB reach the plugin's long code (the default would overflow int).
            assertThrows(IllegalArgumentException.class, () -> rsm.fetchLogSegment(m, 3_000_000_000L, 1L));
            rsm.close();
        }
    }
}
