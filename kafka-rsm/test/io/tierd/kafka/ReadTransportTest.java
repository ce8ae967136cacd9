package io.tierd.kafka;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteStorageException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The .log windows' transport (TierdClient.getRange, the JDK's blocking
 * client): no proxy whatever the JVM's proxy settings, keep-alive connections
 * reused, and an answer that stalls, trickles past the timeout or is cut
 * mid-body fails as the error table says, never with wrong bytes.
 */
class ReadTransportTest {
    @TempDir
    Path tmp;

    @Test
    void theJvmsProxySettingsAreIgnoredAndConnectionsAreReused() throws Exception {
        String[] keys = {"http.proxyHost", "http.proxyPort", "http.nonProxyHosts"};
        String[] saved = new String[keys.length];
        for (int i = 0; i < keys.length; i++) {
            saved[i] = System.getProperty(keys[i]);
        }
        int closed;
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            closed = s.getLocalPort();
        }
        // A proxy that refuses every connection, for every host: a read through it would fail.
        System.setProperty("http.proxyHost", "127.0.0.1");
        System.setProperty("http.proxyPort", Integer.toString(closed));
        System.setProperty("http.nonProxyHosts", "");
        try (FakeTierd fake = new FakeTierd(TestData.TOKEN)) {
            TierdRemoteStorageManager rsm = TestData.rsm(TestData.settings(fake, TestData.tokenFile(tmp, TestData.TOKEN)));
            TestData.Segment seg = TestData.segment(tmp, "orders", 0, 0, 20_000, false, true);
            RemoteLogSegmentMetadata m = TestData.meta("orders", 0, 0, 20_000);
            rsm.copyLogSegmentData(m, seg.data());
            byte[] want = Files.readAllBytes(seg.log);
            for (int i = 0; i < 20; i++) {
                assertArrayEquals(want, TestData.readAll(rsm.fetchLogSegment(m, 0)));
            }
            rsm.close();
        } finally {
            for (int i = 0; i < keys.length; i++) {
                if (saved[i] == null) {
                    System.clearProperty(keys[i]);
                } else {
                    System.setProperty(keys[i], saved[i]);
                }
            }
        }
    }

    @Test
    void sequentialWindowsReuseOneConnection() throws Exception {
        byte[] log = TestData.random(4000, 7);
        AtomicInteger accepted = new AtomicInteger();
        try (RawServer srv = new RawServer(accepted, (in, out) -> {
            while (true) {
                String req = readRequest(in);
                if (req == null) {
                    return;
                }
                long[] r = range(req);
                int last = (int) Math.min(r[1], log.length - 1);
                out.write(head(206, last - (int) r[0] + 1, "bytes " + r[0] + "-" + last + "/" + log.length));
                out.write(log, (int) r[0], last - (int) r[0] + 1);
                out.flush();
            }
        })) {
            TierdRemoteStorageManager rsm = rsm(srv.port, "1000");
            assertArrayEquals(log, TestData.readAll(rsm.fetchLogSegment(TestData.meta("orders", 0, 0, log.length), 0)));
            assertEquals(1, accepted.get(), "the windows of one stream went over one kept-alive connection");
            rsm.close();
        }
    }

    @Test
    void anAnswerThatStallsMidBodyIsATimeout() throws Exception {
        try (RawServer srv = new RawServer(new AtomicInteger(), (in, out) -> {
            readRequest(in);
            out.write(head(206, 1000, "bytes 0-999/1000"));
            out.write(new byte[10]);
            out.flush();
            Thread.sleep(30_000);
        })) {
            TierdRemoteStorageManager rsm = rsm(srv.port, "300");
            RemoteStorageException e = assertThrows(RemoteStorageException.class,
                    () -> rsm.fetchLogSegment(TestData.meta("orders", 0, 0, 1000), 0));
            ErrorMappingTest.assertRetriable(e);
            assertTrue(e.getMessage().contains("tierd did not answer within 300 ms"), e.getMessage());
            rsm.close();
        }
    }

    @Test
    void anAnswerTricklingPastTheTimeoutIsATimeout() throws Exception {
        try (RawServer srv = new RawServer(new AtomicInteger(), (in, out) -> {
            readRequest(in);
            out.write(head(206, 1000, "bytes 0-999/1000"));
            for (int i = 0; i < 1000; i++) { // a byte every 50 ms: each read waits less than the timeout
                out.write(0);
                out.flush();
                Thread.sleep(50);
            }
        })) {
            TierdRemoteStorageManager rsm = rsm(srv.port, "300");
            RemoteStorageException e = assertThrows(RemoteStorageException.class,
                    () -> rsm.fetchLogSegment(TestData.meta("orders", 0, 0, 1000), 0));
            ErrorMappingTest.assertRetriable(e);
            assertTrue(e.getMessage().contains("tierd did not answer within 300 ms"), e.getMessage());
            rsm.close();
        }
    }

    @Test
    void anAnswerCutMidBodyIsAPlainError() throws Exception {
        try (RawServer srv = new RawServer(new AtomicInteger(), (in, out) -> {
            readRequest(in);
            out.write(head(206, 1000, "bytes 0-999/1000"));
            out.write(new byte[10]);
            out.flush();
        })) {
            TierdRemoteStorageManager rsm = rsm(srv.port, "5000");
            RemoteStorageException e = assertThrows(RemoteStorageException.class,
                    () -> rsm.fetchLogSegment(TestData.meta("orders", 0, 0, 1000), 0));
            assertEquals(RemoteStorageException.class, e.getClass(), e.toString());
            assertTrue(e.getMessage().contains("exchange with tierd at http://127.0.0.1:" + srv.port + " failed"), e.getMessage());
            rsm.close();
        }
    }

    private TierdRemoteStorageManager rsm(int port, String timeoutMs) throws IOException {
        Map<String, Object> s = new java.util.HashMap<>();
        s.put("tierd.endpoint", "http://127.0.0.1:" + port);
        s.put("tierd.token.file", TestData.tokenFile(tmp, TestData.TOKEN).toString());
        s.put("tierd.request.timeout.ms", timeoutMs);
        s.put("tierd.fetch.window.bytes", "1000");
        s.put("tierd.fetch.window.max.bytes", "1000");
        return TestData.rsm(s);
    }

    private static byte[] head(int status, int length, String contentRange) {
        return ("HTTP/1.1 " + status + " Partial Content\r\nContent-Length: " + length + "\r\nContent-Range: " + contentRange
                + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII);
    }

    /** @return the request's head, or null at the end of the connection */
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

    /** @return the first and last positions of a request's "Range: bytes=a-b" */
    private static long[] range(String req) {
        for (String line : req.split("\r\n")) {
            if (line.toLowerCase(java.util.Locale.ROOT).startsWith("range: bytes=")) {
                String[] ab = line.substring("range: bytes=".length()).split("-", -1);
                return new long[] {Long.parseLong(ab[0]), ab[1].isEmpty() ? Long.MAX_VALUE : Long.parseLong(ab[1])};
            }
        }
        throw new IllegalArgumentException("no Range in " + req);
    }

    /** One connection's conversation. */
    interface Conversation {
        void talk(InputStream in, OutputStream out) throws Exception;
    }

    /** A server on a real socket that answers each connection as told, counting them. */
    static final class RawServer implements AutoCloseable {
        final ServerSocket s;
        final int port;

        RawServer(AtomicInteger accepted, Conversation conv) throws IOException {
            s = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
            port = s.getLocalPort();
            Thread t = new Thread(() -> {
                while (!s.isClosed()) {
                    Socket c;
                    try {
                        c = s.accept();
                    } catch (IOException e) {
                        return;
                    }
                    accepted.incrementAndGet();
                    Thread h = new Thread(() -> {
                        try (Socket cc = c) {
                            conv.talk(cc.getInputStream(), cc.getOutputStream());
                        } catch (Exception e) {
                            // The client went away: the test says what it expects of that.
                        }
                    });
                    h.setDaemon(true);
                    h.start();
                }
            });
            t.setDaemon(true);
            t.start();
        }

        @Override
        public void close() throws IOException {
            s.close();
        }
    }
}
