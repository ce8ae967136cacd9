package io.tierd.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.FileTime;
import java.util.List;
import java.util.stream.Collectors;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteResourceNotFoundException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageManager.IndexType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The bearer token is re-read when its file changes, so it can be rotated without restarting the broker. */
class TokenTest {
    @TempDir
    Path tmp;

    private static void call(TierdRemoteStorageManager rsm, RemoteLogSegmentMetadata m) {
        // Not found is an answer past the token check; a refused token is a plain RemoteStorageException.
        assertThrows(RemoteResourceNotFoundException.class, () -> rsm.fetchIndex(m, IndexType.OFFSET));
    }

    private List<String> tokensSeen(FakeTierd fake) {
        return fake.requests.stream().map(r -> r.header("Authorization")).collect(Collectors.toList());
    }

    @Test
    void aRewrittenTokenFileIsReadAgain() throws Exception {
        try (FakeTierd fake = new FakeTierd("token-one")) {
            Path f = TestData.tokenFile(tmp, "token-one");
            TierdRemoteStorageManager rsm = TestData.rsm(TestData.settings(fake, f));
            RemoteLogSegmentMetadata m = TestData.meta("t", 0, 0, 1);
            call(rsm, m);
            fake.token = "token-two-longer";
            Files.write(f, "token-two-longer\n".getBytes(StandardCharsets.UTF_8));
            call(rsm, m);
            assertEquals(List.of("Bearer token-one", "Bearer token-two-longer"), tokensSeen(fake));
            rsm.close();
        }
    }

    @Test
    void aTokenRenamedOverTheFileIsReadAgain() throws Exception {
        try (FakeTierd fake = new FakeTierd("token-one")) {
            Path f = TestData.tokenFile(tmp, "token-one");
            TierdRemoteStorageManager rsm = TestData.rsm(TestData.settings(fake, f));
            RemoteLogSegmentMetadata m = TestData.meta("t", 0, 0, 1);
            call(rsm, m);
            fake.token = "token-two";
            Path next = Files.write(tmp.resolve("token.new"), "token-two\n".getBytes(StandardCharsets.UTF_8));
            Files.move(next, f, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            call(rsm, m);
            assertEquals(List.of("Bearer token-one", "Bearer token-two"), tokensSeen(fake));
            rsm.close();
        }
    }

    @Test
    void a401WithAnUnnoticedChangeReadsTheFileAndRetriesOnce() throws Exception {
        try (FakeTierd fake = new FakeTierd("token-AAA")) {
            Path f = TestData.tokenFile(tmp, "token-AAA");
            FileTime mtime = Files.getLastModifiedTime(f);
            TierdRemoteStorageManager rsm = TestData.rsm(TestData.settings(fake, f));
            RemoteLogSegmentMetadata m = TestData.meta("t", 0, 0, 1);
            call(rsm, m);
            // Same size, same modification time, same inode: the attribute check cannot see it.
            fake.token = "token-BBB";
            Files.write(f, "token-BBB\n".getBytes(StandardCharsets.UTF_8));
            Files.setLastModifiedTime(f, mtime);
            call(rsm, m);
            assertEquals(List.of("Bearer token-AAA", "Bearer token-AAA", "Bearer token-BBB"), tokensSeen(fake));
            rsm.close();
        }
    }

    @Test
    void aTokenFileGoneAfterConfigureKeepsTheLastToken() throws Exception {
        try (FakeTierd fake = new FakeTierd("token-one")) {
            Path f = TestData.tokenFile(tmp, "token-one");
            TierdRemoteStorageManager rsm = TestData.rsm(TestData.settings(fake, f));
            Files.delete(f);
            call(rsm, TestData.meta("t", 0, 0, 1));
            assertEquals(List.of("Bearer token-one"), tokensSeen(fake));
            rsm.close();
        }
    }
}
