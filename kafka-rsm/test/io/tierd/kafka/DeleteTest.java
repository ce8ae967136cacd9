package io.tierd.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteResourceNotFoundException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** deleteLogSegmentData: DELETE C, idempotent (2xx or 404 both succeed). */
class DeleteTest {
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

    @Test
    void deleteTwiceThenEveryReadIsNotFound() throws Exception {
        TestData.Segment s = TestData.segment(tmp, "orders", 0, 0, 300, true, true);
        RemoteLogSegmentMetadata m = TestData.meta("orders", 0, 0, 300);
        rsm.copyLogSegmentData(m, s.data());
        rsm.deleteLogSegmentData(m);
        rsm.deleteLogSegmentData(m);
        assertFalse(fake.copies.containsKey("/v1/segments/orders/0/0/" + m.remoteLogSegmentId().id()));
        assertEquals(2, fake.requests("DELETE", m.remoteLogSegmentId().id().toString()).size());
        assertThrows(RemoteResourceNotFoundException.class, () -> rsm.fetchLogSegment(m, 0));
    }

    @Test
    void aDeleteOfANeverCopiedAttemptSucceeds() throws Exception {
        // After a failed copy the broker deletes that attempt, which tierd may never have stored.
        rsm.deleteLogSegmentData(TestData.meta("orders", 0, 0, 300));
    }

    @Test
    void a404AnswerCountsAsDeleted() throws Exception {
        fake.hook = r -> FakeTierd.Answer.error(404, "NOT_FOUND", "no such copy");
        rsm.deleteLogSegmentData(TestData.meta("orders", 0, 0, 300));
    }

    @Test
    void otherFailuresAreErrorsWithTierdsMessage() throws Exception {
        fake.hook = r -> FakeTierd.Answer.error(500, "INTERNAL", "rsm: delete of orders-0: pebble: closed");
        RemoteStorageException e = assertThrows(RemoteStorageException.class,
                () -> rsm.deleteLogSegmentData(TestData.meta("orders", 0, 0, 300)));
        assertTrue(e.getMessage().contains("500 INTERNAL: rsm: delete of orders-0: pebble: closed"), e.getMessage());
    }
}
