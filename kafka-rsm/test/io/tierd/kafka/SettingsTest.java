package io.tierd.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import org.apache.kafka.server.log.remote.storage.RemoteResourceNotFoundException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageManager.IndexType;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** configure: the stripped rsm.config.* keys and broker.id, defaults, and a clear error per bad setting. */
class SettingsTest {
    @TempDir
    Path tmp;
    Path token;

    @BeforeEach
    void token() throws Exception {
        token = TestData.tokenFile(tmp, TestData.TOKEN);
    }

    private Map<String, Object> minimal() {
        Map<String, Object> m = new HashMap<>();
        m.put("tierd.token.file", token.toString());
        return m;
    }

    @Test
    void defaultsFitASidecarOnTheSameHost() {
        Settings s = Settings.parse(minimal());
        assertEquals("http://127.0.0.1:7452", s.endpoint.toString());
        assertEquals(Duration.ofMillis(30_000), s.requestTimeout);
        assertEquals(Duration.ofMillis(600_000), s.copyTimeout);
        assertEquals(Duration.ofMillis(10_000), s.connectTimeout);
        assertEquals(1 << 20, s.fetchWindowBytes);
        assertEquals(8 << 20, s.fetchWindowMaxBytes);
        assertEquals(0, s.pathMap.size());
        assertEquals(Settings.CopyMode.PATH, s.copyMode);
        assertNull(s.brokerId);
        assertNull(s.tlsCaFile);
        assertEquals(TestData.TOKEN, s.token.current());
    }

    @Test
    void valuesAsTheBrokerPassesThem() {
        Map<String, Object> m = minimal();
        m.put("broker.id", 7);
        m.put("tierd.request.timeout.ms", "1500");
        m.put("tierd.copy.timeout.ms", 900_000);
        m.put("tierd.connect.timeout.ms", 2000L);
        m.put("tierd.fetch.window.bytes", " 65536 ");
        m.put("tierd.copy.mode", "UPLOAD");
        m.put("tierd.endpoint", "http://tierd.local:9000/base/");
        m.put("some.other.plugin.setting", "ignored");
        Settings s = Settings.parse(m);
        assertEquals(7, s.brokerId);
        assertEquals(Duration.ofMillis(1500), s.requestTimeout);
        assertEquals(Duration.ofMillis(900_000), s.copyTimeout);
        assertEquals(Duration.ofMillis(2000), s.connectTimeout);
        assertEquals(65536, s.fetchWindowBytes);
        assertEquals(Settings.CopyMode.UPLOAD, s.copyMode);
        assertEquals("http://tierd.local:9000/base", s.endpoint.toString());
    }

    @Test
    void brokerIdAsAString() {
        Map<String, Object> m = minimal();
        m.put("broker.id", "12");
        assertEquals(12, Settings.parse(m).brokerId);
    }

    @Test
    void aLargeFirstWindowRaisesTheDefaultMax() {
        Map<String, Object> m = minimal();
        m.put("tierd.fetch.window.bytes", Integer.toString(16 << 20));
        assertEquals(16 << 20, Settings.parse(m).fetchWindowMaxBytes);
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "tierd.request.timeout.ms|abc|is not a whole number",
        "tierd.request.timeout.ms|0|out of range",
        "tierd.copy.timeout.ms|-5|out of range",
        "tierd.connect.timeout.ms|1.5|is not a whole number",
        "tierd.fetch.window.bytes|999999999999|out of range",
        "tierd.fetch.window.max.bytes|10|is below tierd.fetch.window.bytes",
        "tierd.copy.mode|stream|is neither path nor upload",
        "tierd.endpoint|ftp://host:1|is not an http:// or https:// URL",
        "tierd.endpoint|http://|is not a URL",
        "tierd.endpoint|http://user:pw@host:1|must not carry credentials",
        "tierd.endpoint|http://host:1/?q=1|must have no query",
        "tierd.path.map|/a|is not brokerPrefix=sidecarPrefix",
        "tierd.path.map|a=/b|must be absolute",
        "tierd.tls.ca.file|/no/such/ca.pem|set, but tierd.endpoint is not https://",
        "tierd.endpiont|http://x:1|unknown setting",
        "broker.id|one|is not a whole number",
        "rsm.config.tierd.endpoint|http://x:1|with the rsm.config. prefix stripped",
    })
    void aBadSettingIsNamed(String key, String value, String why) {
        Map<String, Object> m = minimal();
        m.put(key, value);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new TierdRemoteStorageManager().configure(m));
        assertTrue(e.getMessage().contains(key + ": "), e.getMessage());
        assertTrue(e.getMessage().contains(why), e.getMessage());
    }

    @Test
    void everyProblemIsReportedAtOnce() {
        Map<String, Object> m = new HashMap<>();
        m.put("tierd.request.timeout.ms", "x");
        m.put("tierd.copy.mode", "y");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Settings.parse(m));
        assertTrue(e.getMessage().contains("tierd.token.file: required"), e.getMessage());
        assertTrue(e.getMessage().contains("tierd.request.timeout.ms: "), e.getMessage());
        assertTrue(e.getMessage().contains("tierd.copy.mode: "), e.getMessage());
    }

    @Test
    void aBadTokenFileIsNamedWithoutItsContent() throws Exception {
        Map<String, Object> m = minimal();
        m.put("tierd.token.file", tmp.resolve("missing").toString());
        assertTrue(assertThrows(IllegalArgumentException.class, () -> Settings.parse(m)).getMessage()
                .contains("tierd.token.file: token file " + tmp.resolve("missing") + " cannot be read"));

        Files.write(token, "\n  \n".getBytes(StandardCharsets.UTF_8));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> Settings.parse(minimal())).getMessage().contains("is empty"));

        Files.write(token, "s3cr3t-first\ns3cr3t-second\n".getBytes(StandardCharsets.UTF_8));
        String msg = assertThrows(IllegalArgumentException.class, () -> Settings.parse(minimal())).getMessage();
        assertTrue(msg.contains("more than one line"), msg);
        assertFalse(msg.contains("s3cr3t"), msg);

        Files.write(token, "s3cr3t with space".getBytes(StandardCharsets.UTF_8));
        msg = assertThrows(IllegalArgumentException.class, () -> Settings.parse(minimal())).getMessage();
        assertTrue(msg.contains("cannot be sent in an HTTP header"), msg);
        assertFalse(msg.contains("s3cr3t"), msg);
    }

    @Test
    void theTokensSurroundingWhitespaceIsIgnored() throws Exception {
        Files.write(token, ("\n  " + TestData.TOKEN + "  \r\n").getBytes(StandardCharsets.UTF_8));
        assertEquals(TestData.TOKEN, Settings.parse(minimal()).token.current());
    }

    @Test
    void callsBeforeConfigureAndAfterCloseFail() throws Exception {
        TierdRemoteStorageManager r = new TierdRemoteStorageManager();
        assertTrue(assertThrows(RemoteStorageException.class, () -> r.fetchIndex(TestData.meta("t", 0, 0, 1), IndexType.OFFSET))
                .getMessage().contains("not configured"));
        r.configure(minimal());
        r.close();
        assertTrue(assertThrows(RemoteStorageException.class, () -> r.fetchIndex(TestData.meta("t", 0, 0, 1), IndexType.OFFSET))
                .getMessage().contains("closed"));
    }

    @Test
    void anEndpointPathPrefixComesBeforeEveryPath() throws Exception {
        try (FakeTierd fake = new FakeTierd(TestData.TOKEN)) {
            Map<String, Object> m = minimal();
            m.put("tierd.endpoint", fake.endpoint() + "/tierd/");
            TierdRemoteStorageManager r = TestData.rsm(m);
            assertThrows(RemoteResourceNotFoundException.class, () -> r.fetchIndex(TestData.meta("t", 0, 0, 1), IndexType.OFFSET));
            assertTrue(fake.requests.get(0).path.startsWith("/tierd/v1/segments/t/0/0/"), fake.requests.get(0).path);
            r.close();
        }
    }
}
