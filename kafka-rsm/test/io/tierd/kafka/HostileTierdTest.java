package io.tierd.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
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
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteStorageException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The plugin against a tierd that misbehaves (or anything else listening on its
 * port): answers larger than asked, answers that never end, a copy it stops
 * reading. The broker must come to no harm: bounded memory, no file of the
 * broker's held open after the call, no thread left running after close().
 * The guards ({@code @Timeout}) turn a hang into a failure; they are not
 * speed assertions.
 */
class HostileTierdTest {
    @TempDir
    Path tmp;
    RawServer raw;
    Map<String, Object> settings;
    RemoteLogSegmentMetadata meta;

    /**
     * A one-answer-per-connection HTTP server on a real socket: it reads the
     * request head, then runs the test's script on the connection.
     */
    static final class RawServer implements AutoCloseable {
        interface Script {
            void run(String head, InputStream in, OutputStream out) throws IOException;
        }

        final ServerSocket socket;
        final List<String> heads = new CopyOnWriteArrayList<>();
        /** Bytes the scripts wrote before their client went away (or they ended). */
        final AtomicLong sent = new AtomicLong();
        volatile Script script;
        private final Thread acceptor;

        RawServer() throws IOException {
            socket = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
            acceptor = new Thread(() -> {
                while (!socket.isClosed()) {
                    Socket c;
                    try {
                        c = socket.accept();
                    } catch (IOException e) {
                        return;
                    }
                    Thread t = new Thread(() -> serve(c));
                    t.setDaemon(true);
                    t.start();
                }
            }, "raw-tierd");
            acceptor.setDaemon(true);
            acceptor.start();
        }

        String endpoint() {
            return "http://127.0.0.1:" + socket.getLocalPort();
        }

        private void serve(Socket c) {
            try (Socket s = c; InputStream in = s.getInputStream(); OutputStream out = s.getOutputStream()) {
                StringBuilder head = new StringBuilder();
                while (!head.toString().endsWith("\r\n\r\n")) {
                    int b = in.read();
                    if (b < 0) {
                        return;
                    }
                    head.append((char) b);
                }
                heads.add(head.toString());
                script.run(head.toString(), in, new OutputStream() {
                    @Override
                    public void write(int b) throws IOException {
                        out.write(b);
                        sent.incrementAndGet();
                    }

                    @Override
                    public void write(byte[] b, int off, int len) throws IOException {
                        out.write(b, off, len);
                        sent.addAndGet(len);
                    }
                });
            } catch (IOException e) {
                // The client went away.
            }
        }

        @Override
        public void close() throws IOException {
            socket.close();
        }
    }

    /** Writes n zero bytes, or until the client goes away. */
    static void zeros(OutputStream out, long n) throws IOException {
        byte[] buf = new byte[64 << 10];
        for (long left = n; left > 0; left -= buf.length) {
            out.write(buf, 0, (int) Math.min(left, buf.length));
        }
        out.flush();
    }

    @BeforeEach
    void start() throws Exception {
        raw = new RawServer();
        settings = new HashMap<>();
        settings.put("tierd.endpoint", raw.endpoint());
        settings.put("tierd.token.file", TestData.tokenFile(tmp, TestData.TOKEN).toString());
        settings.put("broker.id", 1);
        settings.put("tierd.fetch.window.bytes", "4096");
        settings.put("tierd.fetch.window.max.bytes", "4096");
        settings.put("tierd.request.timeout.ms", "60000");
        meta = TestData.meta("orders", 0, 0, 4096);
    }

    @AfterEach
    void stop() throws IOException {
        raw.close();
    }

    /** An answer far larger than the window asked for is refused as it arrives, not read whole first. */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aWindowAnswerLargerThanAskedIsNotReadWhole() throws Exception {
        long announced = 512L << 20;
        raw.script = (head, in, out) -> {
            out.write(("HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-4095/4096\r\nContent-Length: " + announced
                    + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
            zeros(out, announced);
        };
        TierdRemoteStorageManager rsm = TestData.rsm(settings);
        try {
            RemoteStorageException e = assertThrows(RemoteStorageException.class, () -> rsm.fetchLogSegment(meta, 0));
            assertTrue(e.getMessage().contains("more than"), e.getMessage());
        } finally {
            rsm.close();
        }
        assertTrue(raw.sent.get() < announced / 4, "the plugin read " + raw.sent.get() + " bytes of a " + announced
                + "-byte answer to a 4096-byte window");
    }

    /** The same for a body without a length (chunked) that never ends, and for an error answer. */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void anEndlessAnswerIsCutAtItsBound() throws Exception {
        for (String status : new String[] {"206 Partial Content\r\nContent-Range: bytes 0-4095/4096", "500 Internal Server Error"}) {
            raw.sent.set(0);
            raw.script = (head, in, out) -> {
                out.write(("HTTP/1.1 " + status + "\r\nTransfer-Encoding: chunked\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
                byte[] chunk = new byte[64 << 10];
                byte[] size = (Integer.toHexString(chunk.length) + "\r\n").getBytes(StandardCharsets.US_ASCII);
                byte[] crlf = "\r\n".getBytes(StandardCharsets.US_ASCII);
                while (true) {
                    out.write(size);
                    out.write(chunk);
                    out.write(crlf);
                }
            };
            TierdRemoteStorageManager rsm = TestData.rsm(settings);
            try {
                RemoteStorageException e = assertThrows(RemoteStorageException.class, () -> rsm.fetchLogSegment(meta, 0));
                assertTrue(e.getMessage().contains("more than"), status + ": " + e.getMessage());
            } finally {
                rsm.close();
            }
        }
    }

    /** @return the paths this process holds open (Linux: /proc/self/fd) */
    static Set<String> openFiles() throws IOException {
        Set<String> out;
        try (var s = Files.list(Path.of("/proc/self/fd"))) {
            out = s.map(p -> {
                try {
                    return Files.readSymbolicLink(p).toString();
                } catch (IOException e) {
                    return "";
                }
            }).collect(Collectors.toSet());
        }
        return out;
    }

    /**
     * A copy by upload that tierd stops reading (it answers nothing; the copy times
     * out): once copyLogSegmentData has thrown, the plugin holds none of the
     * broker's files open, since the broker deletes them after the call.
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aCopyByUploadThatTimesOutLeavesNoFileOpen() throws Exception {
        if (!Files.isDirectory(Path.of("/proc/self/fd"))) {
            return; // not Linux: nothing to look at
        }
        TestData.Segment seg = TestData.segment(tmp, "orders", 0, 0, 32 << 20, true, true);
        raw.script = (head, in, out) -> {
            in.readNBytes(64 << 10);
            try {
                Thread.sleep(30_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        };
        settings.put("tierd.copy.mode", "upload");
        settings.put("tierd.copy.timeout.ms", "500");
        TierdRemoteStorageManager rsm = TestData.rsm(settings);
        try {
            RemoteLogSegmentMetadata m = TestData.meta("orders", 0, 0, 32 << 20);
            assertThrows(RemoteStorageException.class, () -> rsm.copyLogSegmentData(m, seg.data()));
            List<String> held = new ArrayList<>();
            for (String f : openFiles()) {
                if (f.startsWith(seg.dir.toString())) {
                    held.add(f);
                }
            }
            assertEquals(List.of(), held, "the broker's files the plugin holds open after the copy call ended");
        } finally {
            rsm.close();
        }
    }

    /** @return the live threads whose name starts with prefix */
    static Set<Thread> threads(String prefix) {
        return Thread.getAllStackTraces().keySet().stream().filter(t -> t.getName().startsWith(prefix))
                .collect(Collectors.toSet());
    }

    /**
     * After close(), the plugin's HTTP client threads end (Java 21+ shuts the
     * client down; before that they end once the client is unreachable), even
     * though the broker keeps the closed plugin object.
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void closeLeavesNoThreadRunning() throws Exception {
        raw.script = (head, in, out) -> out.write("HTTP/1.1 204 No Content\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
        Set<Thread> before = threads("HttpClient-");
        TierdRemoteStorageManager rsm = TestData.rsm(settings);
        rsm.deleteLogSegmentData(meta);
        Set<Thread> mine = threads("HttpClient-");
        mine.removeAll(before);
        assertFalse(mine.isEmpty(), "the call started no HttpClient thread to watch");
        rsm.close();
        while (mine.stream().anyMatch(Thread::isAlive)) {
            System.gc();
            Thread.sleep(100);
        }
        assertThrows(RemoteStorageException.class, () -> rsm.deleteLogSegmentData(meta));
    }

    /**
     * Answers that are wrong in other ways fail the call with a
     * RemoteStorageException that does not hold the token: a redirect to
     * another host (not followed: the token is not sent there), a 206 for
     * another range, a body shorter than its Content-Length.
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void wrongAnswersFailWithoutTheToken() throws Exception {
        try (RawServer other = new RawServer()) {
            other.script = (head, in, out) -> out.write("HTTP/1.1 204 No Content\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
            String[] answers = {
                "HTTP/1.1 307 Temporary Redirect\r\nLocation: " + other.endpoint() + "/v1/x\r\nContent-Length: 0\r\n\r\n",
                "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 1-4096/8192\r\nContent-Length: 4096\r\n\r\n",
                "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-4095/8192\r\nContent-Length: 4096\r\n\r\n" + "x".repeat(100),
            };
            for (String answer : answers) {
                raw.script = (head, in, out) -> {
                    out.write(answer.getBytes(StandardCharsets.US_ASCII));
                    if (answer.startsWith("HTTP/1.1 206")) {
                        zeros(out, answer.endsWith("\r\n\r\n") ? 4096 : 0);
                    }
                };
                TierdRemoteStorageManager rsm = TestData.rsm(settings);
                try {
                    RemoteStorageException e = assertThrows(RemoteStorageException.class, () -> rsm.fetchLogSegment(meta, 0),
                            answer);
                    assertFalse(String.valueOf(e.getMessage()).contains(TestData.TOKEN), e.getMessage());
                    for (Throwable c = e.getCause(); c != null; c = c.getCause()) {
                        assertFalse(String.valueOf(c.getMessage()).contains(TestData.TOKEN), c.toString());
                    }
                } finally {
                    rsm.close();
                }
            }
            assertEquals(List.of(), other.heads, "requests sent to the host a redirect named");
        }
    }
}
