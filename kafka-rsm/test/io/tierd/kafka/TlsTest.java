package io.tierd.kafka;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.KeyStore;
import java.util.Map;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteStorageException;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** An https endpoint trusted through tierd.tls.ca.file, with a certificate made by the JDK's keytool. */
class TlsTest {
    @TempDir
    static Path certs;
    static Path keystore;
    static Path pem;
    @TempDir
    Path tmp;

    private static void keytool(String... args) throws Exception {
        String[] cmd = new String[args.length + 1];
        cmd[0] = Paths.get(System.getProperty("java.home"), "bin", "keytool").toString();
        System.arraycopy(args, 0, cmd, 1, args.length);
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        assertEquals(0, p.waitFor(), "keytool: " + out);
    }

    /** One certificate for the class: keytool is slow to start. */
    @BeforeAll
    static void certificate() throws Exception {
        keystore = certs.resolve("tierd.p12");
        pem = certs.resolve("ca.pem");
        keytool("-genkeypair", "-alias", "tierd", "-keyalg", "EC", "-groupname", "secp256r1", "-dname", "CN=tierd test",
                "-ext", "SAN=ip:127.0.0.1,dns:localhost", "-validity", "2", "-storetype", "PKCS12",
                "-keystore", keystore.toString(), "-storepass", "changeit", "-keypass", "changeit");
        keytool("-exportcert", "-rfc", "-alias", "tierd", "-keystore", keystore.toString(), "-storepass", "changeit",
                "-file", pem.toString());
    }

    private SSLContext serverContext() throws Exception {
        KeyStore ks = KeyStore.getInstance("PKCS12");
        try (InputStream in = Files.newInputStream(keystore)) {
            ks.load(in, "changeit".toCharArray());
        }
        KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        kmf.init(ks, "changeit".toCharArray());
        SSLContext ctx = SSLContext.getInstance("TLS");
        ctx.init(kmf.getKeyManagers(), null, null);
        return ctx;
    }

    @Test
    void theCaFileIsTrusted() throws Exception {
        try (FakeTierd fake = new FakeTierd(TestData.TOKEN, 0, serverContext())) {
            assertTrue(fake.endpoint().startsWith("https://"));
            Map<String, Object> s = TestData.settings(fake, TestData.tokenFile(tmp, TestData.TOKEN));
            s.put("tierd.tls.ca.file", pem.toString());
            TierdRemoteStorageManager rsm = TestData.rsm(s);
            TestData.Segment seg = TestData.segment(tmp, "orders", 0, 0, 3000, false, true);
            RemoteLogSegmentMetadata m = TestData.meta("orders", 0, 0, 3000);
            rsm.copyLogSegmentData(m, seg.data());
            assertArrayEquals(Files.readAllBytes(seg.log), TestData.readAll(rsm.fetchLogSegment(m, 0)));
            rsm.close();
        }
    }

    @Test
    void withoutTheCaFileTheHandshakeFailsAsAnError() throws Exception {
        try (FakeTierd fake = new FakeTierd(TestData.TOKEN, 0, serverContext())) {
            TierdRemoteStorageManager rsm = TestData.rsm(TestData.settings(fake, TestData.tokenFile(tmp, TestData.TOKEN)));
            RemoteStorageException e = assertThrows(RemoteStorageException.class,
                    () -> rsm.fetchLogSegment(TestData.meta("orders", 0, 0, 3000), 0));
            assertEquals(RemoteStorageException.class, e.getClass(), "a trust problem is not transient: " + e);
            assertEquals(0, fake.requests.size());
            rsm.close();
        }
    }

    @Test
    void aCaFileThatIsNotPemIsNamed() throws Exception {
        Path bad = Files.write(tmp.resolve("bad.pem"), "not a certificate".getBytes());
        Map<String, Object> s = Map.of("tierd.endpoint", "https://127.0.0.1:1", "tierd.token.file",
                TestData.tokenFile(tmp, TestData.TOKEN).toString(), "tierd.tls.ca.file", bad.toString());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new TierdRemoteStorageManager().configure(s));
        assertTrue(e.getMessage().startsWith("tierd.tls.ca.file: " + bad), e.getMessage());
    }
}
