package io.tierd.kafka;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.net.Authenticator;
import java.net.PasswordAuthentication;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.server.log.remote.storage.RemoteStorageException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The .log windows' transport (TierdClient.getRange) against answers that
 * break HTTP's rules or the call's: a head that trickles past the timeout,
 * a challenge the JVM's default Authenticator would answer, and a
 * connection left with bytes past its answer. None of them serves wrong
 * bytes, waits past the timeout, or sends anything but the bearer token.
 */
class ReadTransportHostileTest {
    @TempDir
    Path tmp;

    private TierdRemoteStorageManager rsm(int port, String timeoutMs) throws IOException {
        Map<String, Object> s = new java.util.HashMap<>();
        s.put("tierd.endpoint", "http://127.0.0.1:" + port);
        s.put("tierd.token.file", TestData.tokenFile(tmp, TestData.TOKEN).toString());
        s.put("tierd.request.timeout.ms", timeoutMs);
        s.put("tierd.fetch.window.bytes", "1000");
        s.put("tierd.fetch.window.max.bytes", "1000");
        return TestData.rsm(s);
    }

    private static String readRequest(InputStream in) throws IOException {
        StringBuilder sb = new StringBuilder();
        int c;
        while ((c = in.read()) >= 0) {
            sb.append((char) c);
            if (sb.length() >= 4 && sb.substring(sb.length() - 4).equals("\r\n\r\n")) {
                return sb.toString();
            }
        }
        return null;
    }

    private static byte[] ascii(String s) {
        return s.getBytes(StandardCharsets.US_ASCII);
    }

    /**
     * A head (status line and headers) that trickles a byte at a time, each
     * well within the timeout, for far longer than it: the timeout bounds the
     * exchange as a whole, the head included, and a whole answer that comes
     * after it is not taken.
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aHeadTricklingPastTheTimeoutIsATimeout() throws Exception {
        AtomicInteger answered = new AtomicInteger();
        try (ReadTransportTest.RawServer srv = new ReadTransportTest.RawServer(new AtomicInteger(), (in, out) -> {
            readRequest(in);
            out.write(ascii("HTTP/1.1 206 Partial Content\r\nX-Slow: "));
            for (int i = 0; i < 60; i++) { // a byte every 50 ms for 3 s: each read waits less than the timeout
                out.write('a');
                out.flush();
                Thread.sleep(50);
            }
            out.write(ascii("\r\nContent-Length: 1000\r\nContent-Range: bytes 0-999/1000\r\n\r\n"));
            out.write(new byte[1000]);
            out.flush();
            answered.incrementAndGet();
            Thread.sleep(5_000);
        })) {
            TierdRemoteStorageManager rsm = rsm(srv.port, "300");
            try {
                RemoteStorageException e = assertThrows(RemoteStorageException.class,
                        () -> TestData.readAll(rsm.fetchLogSegment(TestData.meta("orders", 0, 0, 1000), 0)));
                ErrorMappingTest.assertRetriable(e);
                assertTrue(e.getMessage().contains("tierd did not answer within 300 ms"), e.getMessage());
                assertEquals(0, answered.get(), "the call waited for the whole trickled head");
            } finally {
                rsm.close();
            }
        }
    }

    /**
     * A 401 with a Basic challenge (from whatever listens on tierd's port)
     * while the JVM has a default Authenticator, as a broker set up for a
     * proxy may: the plugin sends only its bearer token, asks the
     * Authenticator nothing, and fails the call as unauthenticated.
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aBasicChallengeIsNotAnsweredWithTheJvmsCredentials() throws Exception {
        List<String> auths = Collections.synchronizedList(new ArrayList<>());
        AtomicInteger asked = new AtomicInteger();
        Authenticator saved = Authenticator.getDefault();
        Authenticator.setDefault(new Authenticator() {
            @Override
            protected PasswordAuthentication getPasswordAuthentication() {
                asked.incrementAndGet();
                return new PasswordAuthentication("proxyuser", "proxy-password".toCharArray());
            }
        });
        try (ReadTransportTest.RawServer srv = new ReadTransportTest.RawServer(new AtomicInteger(), (in, out) -> {
            while (true) {
                String req = readRequest(in);
                if (req == null) {
                    return;
                }
                for (String line : req.split("\r\n")) {
                    if (line.toLowerCase(java.util.Locale.ROOT).startsWith("authorization:")) {
                        auths.add(line.substring("authorization:".length()).trim());
                    }
                }
                String body = "{\"error\":\"no\",\"reason\":\"UNAUTHENTICATED\"}";
                out.write(ascii("HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"x\"\r\nContent-Length: "
                        + body.length() + "\r\n\r\n" + body));
                out.flush();
            }
        })) {
            TierdRemoteStorageManager rsm = rsm(srv.port, "5000");
            try {
                assertThrows(RemoteStorageException.class, () -> rsm.fetchLogSegment(TestData.meta("orders", 0, 0, 1000), 0));
            } finally {
                rsm.close();
            }
        } finally {
            Authenticator.setDefault(saved);
        }
        assertEquals(0, asked.get(), "the JVM's default Authenticator was asked for tierd's 401");
        for (String a : auths) {
            assertEquals("Bearer " + TestData.TOKEN, a, "sent to tierd's port");
        }
        assertTrue(!auths.isEmpty());
    }

    /**
     * An answer whose body goes on past its Content-Length, on a kept-alive
     * connection: the bytes past it are not the next window's answer. The
     * next window fails or is read right, never served from those bytes.
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void bytesPastAnAnswerNeverServeTheNextWindow() throws Exception {
        byte[] log = TestData.random(2000, 3);
        try (ReadTransportTest.RawServer srv = new ReadTransportTest.RawServer(new AtomicInteger(), (in, out) -> {
            boolean first = true;
            while (true) {
                String req = readRequest(in);
                if (req == null) {
                    return;
                }
                int from = req.contains("bytes=0-") ? 0 : 1000;
                out.write(ascii("HTTP/1.1 206 Partial Content\r\nContent-Length: 1000\r\nContent-Range: bytes " + from + "-"
                        + (from + 999) + "/2000\r\n\r\n"));
                out.write(log, from, 1000);
                if (first) {
                    out.write(ascii("garbage past the answer\r\n\r\n"));
                    first = false;
                }
                out.flush();
            }
        })) {
            TierdRemoteStorageManager rsm = rsm(srv.port, "2000");
            try {
                byte[] got;
                try {
                    got = TestData.readAll(rsm.fetchLogSegment(TestData.meta("orders", 0, 0, 2000), 0));
                } catch (IOException e) {
                    return; // failed: fine, no wrong bytes
                }
                assertArrayEquals(log, got);
            } finally {
                rsm.close();
            }
        }
    }

    /** An HTTP/1.0-style answer without a length, ended by the close, larger than the window: cut at the bound. */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void anAnswerEndedByItsCloseIsBounded() throws Exception {
        try (ReadTransportTest.RawServer srv = new ReadTransportTest.RawServer(new AtomicInteger(), (in, out) -> {
            readRequest(in);
            out.write(ascii("HTTP/1.1 206 Partial Content\r\nConnection: close\r\nContent-Range: bytes 0-999/1000\r\n\r\n"));
            out.write(new byte[5000]);
            out.flush();
        })) {
            TierdRemoteStorageManager rsm = rsm(srv.port, "5000");
            try {
                RemoteStorageException e = assertThrows(RemoteStorageException.class,
                        () -> rsm.fetchLogSegment(TestData.meta("orders", 0, 0, 1000), 0));
                assertTrue(e.getMessage().contains("more than the 1000 bytes"), e.getMessage());
            } finally {
                rsm.close();
            }
        }
    }

    /** A redirect is an error and is not followed: the token goes to tierd's endpoint only. */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aRedirectIsNotFollowed() throws Exception {
        AtomicInteger elsewhere = new AtomicInteger();
        try (ReadTransportTest.RawServer other = new ReadTransportTest.RawServer(elsewhere, (in, out) -> readRequest(in));
                ReadTransportTest.RawServer srv = new ReadTransportTest.RawServer(new AtomicInteger(), (in, out) -> {
                    readRequest(in);
                    out.write(ascii("HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.1:" + other.port
                            + "/x\r\nContent-Length: 0\r\n\r\n"));
                    out.flush();
                })) {
            TierdRemoteStorageManager rsm = rsm(srv.port, "5000");
            try {
                RemoteStorageException e = assertThrows(RemoteStorageException.class,
                        () -> rsm.fetchLogSegment(TestData.meta("orders", 0, 0, 1000), 0));
                assertTrue(e.getMessage().contains("307"), e.getMessage());
            } finally {
                rsm.close();
            }
        }
        assertEquals(0, elsewhere.get(), "the redirect was followed");
    }

    /** Headers far larger than any answer of tierd's fail the call; they are not held whole. */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void hugeHeadersFail() throws Exception {
        try (ReadTransportTest.RawServer srv = new ReadTransportTest.RawServer(new AtomicInteger(), (in, out) -> {
            readRequest(in);
            out.write(ascii("HTTP/1.1 206 Partial Content\r\n"));
            byte[] line = ascii("X-Big: " + "b".repeat(1000) + "\r\n");
            for (int i = 0; i < 64 * 1024; i++) { // 64 MB of headers
                out.write(line);
            }
            out.write(ascii("Content-Length: 1000\r\nContent-Range: bytes 0-999/1000\r\n\r\n"));
            out.write(new byte[1000]);
            out.flush();
        })) {
            TierdRemoteStorageManager rsm = rsm(srv.port, "20000");
            try {
                assertThrows(RemoteStorageException.class, () -> rsm.fetchLogSegment(TestData.meta("orders", 0, 0, 1000), 0));
            } finally {
                rsm.close();
            }
        }
    }


    /** A 200 with the whole object to a ranged read is refused, not served as the window. */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aWholeAnswerToARangedReadIsRefused() throws Exception {
        try (ReadTransportTest.RawServer srv = new ReadTransportTest.RawServer(new AtomicInteger(), (in, out) -> {
            readRequest(in);
            out.write(ascii("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"));
            out.write(new byte[1000]);
            out.flush();
        })) {
            TierdRemoteStorageManager rsm = rsm(srv.port, "5000");
            try {
                RemoteStorageException e = assertThrows(RemoteStorageException.class,
                        () -> rsm.fetchLogSegment(TestData.meta("orders", 0, 0, 1000), 0));
                assertTrue(e.getMessage().contains("answered 200"), e.getMessage());
            } finally {
                rsm.close();
            }
        }
    }

    /**
     * tierd answering 401 to every read: the window is asked for once with the
     * token, and once more only when the token file holds another one; never
     * in a loop.
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void a401ToEveryReadIsAskedAtMostTwice() throws Exception {
        AtomicInteger requests = new AtomicInteger();
        Path tokenFile = TestData.tokenFile(tmp, TestData.TOKEN);
        try (ReadTransportTest.RawServer srv = new ReadTransportTest.RawServer(new AtomicInteger(), (in, out) -> {
            while (readRequest(in) != null) {
                if (requests.incrementAndGet() == 1) {
                    java.nio.file.Files.writeString(tokenFile, "another-token\n");
                }
                String body = "{\"error\":\"no\",\"reason\":\"UNAUTHENTICATED\"}";
                out.write(ascii("HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer realm=\"tierd-rsm\"\r\nContent-Length: "
                        + body.length() + "\r\n\r\n" + body));
                out.flush();
            }
        })) {
            TierdRemoteStorageManager rsm = rsm(srv.port, "5000");
            try {
                assertThrows(RemoteStorageException.class, () -> rsm.fetchLogSegment(TestData.meta("orders", 0, 0, 1000), 0));
            } finally {
                rsm.close();
            }
        }
        assertEquals(2, requests.get(), "requests for one window answered 401 each time");
    }
}
