package io.tierd.kafka;

import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.Method;
import java.net.Authenticator;
import java.net.HttpURLConnection;
import java.net.Proxy;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Function;
import javax.net.ssl.HttpsURLConnection;
import javax.net.ssl.SSLContext;
import org.apache.kafka.server.log.remote.storage.RemoteStorageException;

/**
 * The plugin's HTTP/1.1 clients of tierd's RSM endpoint, shared by every call
 * (both are thread-safe and pool keep-alive connections). Every request
 * carries {@code Authorization: Bearer <token>} from {@link TokenFile}; an
 * answer 401 makes it re-read the token file and, if the token changed, send
 * the request once more (a rotation whose file change the attribute check
 * missed). Every answer's body is read whole, up to a bound of the call's (see
 * {@link BoundedBody}: what a success of that call can hold, 1 MiB for any
 * other answer), so that an answer that goes on past it costs the broker at
 * most that much memory.
 *
 * <p>Copies, index fetches and deletes go through java.net.http
 * ({@link #exchange}): each exchange is bounded by its timeout as a whole, and
 * an interrupt ends its wait at once. Reads of a copy's .log
 * ({@link #getRange}), the plugin's bulk traffic, go through the JDK's
 * blocking client (HttpURLConnection) on the calling thread, straight into one
 * array of the answer's length: java.net.http hands an answer between its
 * selector and worker threads in 16 KiB buffers (about 90 thread switches per
 * MiB here), and measured by {@code tierd bench} it spent several times the
 * CPU per byte read. Such a read is bounded by the timeout between any two
 * bytes and as a whole: until the answer's head is in, by closing its
 * connection at the deadline (the JDK reads the head with no bound but the
 * one between bytes), then checked after each read of the body. It asks the
 * JVM's default Authenticator nothing (java.net.http's client has none
 * either): a challenge on tierd's port is never answered with the broker's
 * other credentials. An interrupt is seen before the request and once the
 * answer is in (a window read takes milliseconds).
 */
final class TierdClient {
    /** Value of the User-Agent header. */
    static final String USER_AGENT = "tierd-kafka-rsm/1";
    /** The largest answer getRange reads whatever its bound, bytes: the largest window. */
    static final int MAX_ANSWER_BYTES = Settings.MAX_WINDOW_BYTES;

    /** The Authenticator of getRange's connections: it has no credentials for any challenge. */
    private static final Authenticator NO_CREDENTIALS = new Authenticator() {
    };

    final Settings settings;
    private final HttpClient http;
    /** Closes a getRange connection whose head is not in by the deadline; its one thread ends when idle. */
    private final ScheduledThreadPoolExecutor deadlines;
    private final SSLContext tls;
    private final String userAgent;

    /**
     * @param settings the plugin's settings
     * @throws IllegalArgumentException when the TLS trust file is unusable
     */
    TierdClient(Settings settings) {
        this.settings = settings;
        HttpClient.Builder b = HttpClient.newBuilder()
                .version(HttpClient.Version.HTTP_1_1)
                .connectTimeout(settings.connectTimeout)
                .followRedirects(HttpClient.Redirect.NEVER)
                .proxy(HttpClient.Builder.NO_PROXY); // tierd is the sidecar: never the JVM's http.proxyHost
        this.tls = settings.tlsCaFile == null ? null : TlsTrust.fromPem(settings.tlsCaFile);
        if (tls != null) {
            b.sslContext(tls);
        }
        this.http = b.build();
        this.deadlines = new ScheduledThreadPoolExecutor(1, r -> {
            Thread t = new Thread(r, "tierd-rsm-deadline");
            t.setDaemon(true);
            return t;
        });
        deadlines.setKeepAliveTime(10, TimeUnit.SECONDS);
        deadlines.allowCoreThreadTimeOut(true);
        deadlines.setRemoveOnCancelPolicy(true);
        this.userAgent = settings.brokerId == null ? USER_AGENT : USER_AGENT + " (broker " + settings.brokerId + ")";
    }

    /** @return the endpoint, for messages */
    String endpoint() {
        return settings.endpoint.toString();
    }

    /**
     * A request builder for a path under the endpoint, with the token and the timeout.
     *
     * @param path the path, starting with '/'
     * @param timeout the exchange's timeout
     * @param token the bearer token
     * @return the builder
     */
    HttpRequest.Builder request(String path, Duration timeout, String token) {
        return HttpRequest.newBuilder(URI.create(settings.endpoint + path))
                .timeout(timeout)
                .header("Authorization", "Bearer " + token)
                .header("User-Agent", userAgent);
    }

    /**
     * Sends a request and reads its answer whole.
     *
     * @param what the call, for messages
     * @param build makes the request for a token (called again after a 401 with a new token)
     * @param timeout the exchange's timeout, the answer's body included
     * @param successBytes the largest success body the call takes, bytes (see {@link BoundedBody})
     * @return the answer, whatever its status
     * @throws RemoteStorageException when no answer came (refused, timed out, interrupted, cut, or larger than its bound)
     */
    HttpResponse<byte[]> exchange(String what, Function<String, HttpRequest> build, Duration timeout, long successBytes)
            throws RemoteStorageException {
        String token = settings.token.current();
        HttpResponse<byte[]> r = sendOnce(what, build.apply(token), timeout, successBytes);
        if (r.statusCode() == 401) {
            String fresh;
            try {
                fresh = settings.token.reload();
            } catch (IOException e) {
                fresh = token;
            }
            if (!fresh.equals(token)) {
                r = sendOnce(what, build.apply(fresh), timeout, successBytes);
            }
        }
        return r;
    }

    private HttpResponse<byte[]> sendOnce(String what, HttpRequest req, Duration timeout, long successBytes)
            throws RemoteStorageException {
        if (Thread.currentThread().isInterrupted()) {
            throw Errors.interrupted(what, new InterruptedException("interrupted before the request"));
        }
        CompletableFuture<HttpResponse<byte[]>> f = http.sendAsync(req, BoundedBody.upTo(successBytes));
        try {
            return f.get(timeout.toMillis(), TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            f.cancel(true);
            throw Errors.interrupted(what, e);
        } catch (TimeoutException e) {
            f.cancel(true);
            throw Errors.timeout(what, timeout, e);
        } catch (ExecutionException e) {
            throw Errors.transport(what, endpoint(), e.getCause() == null ? e : e.getCause(), timeout);
        }
    }

    /** An answer of {@link #getRange}, read whole. */
    static final class Answer {
        final int status;
        /** The Content-Range header, or null. */
        final String contentRange;
        final byte[] body;

        Answer(int status, String contentRange, byte[] body) {
            this.status = status;
            this.contentRange = contentRange;
            this.body = body;
        }
    }

    /**
     * A ranged GET read whole on the calling thread (HttpURLConnection, no proxy,
     * no redirects), with the token's 401 rule.
     *
     * @param what the call, for messages
     * @param path the path under the endpoint, starting with '/'
     * @param range the Range header's value
     * @param timeout bounds the wait for any byte and the exchange as a whole
     * @param successBytes the largest success body the call takes, bytes (other answers: BoundedBody.ERROR_BYTES)
     * @return the answer, whatever its status
     * @throws RemoteStorageException when no whole answer came (refused, timed out, interrupted before it, cut, or
     *     larger than its bound: refused from its Content-Length before its body is read, or cut at the bound)
     */
    Answer getRange(String what, String path, String range, Duration timeout, long successBytes)
            throws RemoteStorageException {
        String token = settings.token.current();
        Answer a = getOnce(what, path, range, timeout, token, successBytes);
        if (a.status == 401) {
            String fresh;
            try {
                fresh = settings.token.reload();
            } catch (IOException e) {
                fresh = token;
            }
            if (!fresh.equals(token)) {
                a = getOnce(what, path, range, timeout, fresh, successBytes);
            }
        }
        return a;
    }

    private Answer getOnce(String what, String path, String range, Duration timeout, String token, long successBytes)
            throws RemoteStorageException {
        if (Thread.currentThread().isInterrupted()) {
            throw Errors.interrupted(what, new InterruptedException("interrupted before the request"));
        }
        long deadline = System.nanoTime() + timeout.toNanos();
        HttpURLConnection c = null;
        AtomicBoolean cut = new AtomicBoolean(); // the deadline closed the connection
        try {
            c = (HttpURLConnection) URI.create(settings.endpoint + path).toURL().openConnection(Proxy.NO_PROXY);
            if (tls != null && c instanceof HttpsURLConnection) {
                ((HttpsURLConnection) c).setSSLSocketFactory(tls.getSocketFactory());
            }
            c.setConnectTimeout(millis(settings.connectTimeout));
            c.setReadTimeout(millis(timeout));
            c.setInstanceFollowRedirects(false);
            c.setUseCaches(false);
            c.setAuthenticator(NO_CREDENTIALS);
            c.setRequestProperty("Authorization", "Bearer " + token);
            c.setRequestProperty("User-Agent", userAgent);
            c.setRequestProperty("Range", range);
            int status = responseCode(c, deadline, cut);
            InputStream in = status >= 400 ? c.getErrorStream() : c.getInputStream();
            long max = status / 100 == 2 ? successBytes : BoundedBody.ERROR_BYTES;
            byte[] body = in == null ? new byte[0] : readWhole(in, c.getContentLengthLong(), max, deadline);
            if (in != null) {
                in.close(); // read whole: the connection goes back to the JDK's keep-alive pool
            }
            Answer a = new Answer(status, c.getHeaderField("Content-Range"), body);
            c = null;
            return a;
        } catch (TimeoutException e) {
            throw Errors.timeout(what, timeout, e);
        } catch (IOException | RuntimeException e) {
            if (cut.get()) { // whatever failed after the deadline closed the connection failed for it
                throw Errors.timeout(what, timeout, headTimeout(e));
            }
            throw Errors.transport(what, endpoint(), e, timeout);
        } finally {
            if (c != null) {
                c.disconnect(); // not reusable mid-answer
            }
        }
    }

    /**
     * The answer's status, its head read by the deadline: the connection is
     * closed at the deadline from another thread, since the JDK bounds the
     * head's read only by the read timeout between bytes (a head trickling a
     * byte at a time would hold the call for as long as it goes on).
     *
     * @throws TimeoutException when the head is not in by the deadline
     * @throws IOException as getResponseCode
     */
    private int responseCode(HttpURLConnection c, long deadline, AtomicBoolean cut) throws IOException, TimeoutException {
        // cut, set before the close, says the deadline closed it: a watch
        // whose task is running still cancels (FutureTask.cancel(false) on a
        // running task returns true), so cancel alone cannot tell.
        ScheduledFuture<?> watch = deadlines.schedule(() -> {
            cut.set(true);
            c.disconnect();
        }, Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
        int status;
        try {
            status = c.getResponseCode();
        } catch (IOException | RuntimeException e) {
            if (!watch.cancel(false) || cut.get()) {
                throw headTimeout(e);
            }
            throw e;
        }
        if (!watch.cancel(false) || cut.get()) {
            throw headTimeout(null); // closed as it came in: the body is not readable
        }
        return status;
    }

    private static TimeoutException headTimeout(Throwable cause) {
        TimeoutException t = new TimeoutException("the answer's head took longer than the timeout");
        if (cause != null) {
            t.initCause(cause);
        }
        return t;
    }

    /**
     * Reads an answer's body whole into one array: its Content-Length (len), or to
     * its end when unknown; at most max bytes (BoundedBody's rule).
     */
    private static byte[] readWhole(InputStream in, long len, long max, long deadline) throws IOException, TimeoutException {
        max = Math.min(max, MAX_ANSWER_BYTES);
        if (len > max) {
            throw new IOException("tierd's answer announces " + len + " bytes, more than the " + max
                    + " bytes this call takes; not read");
        }
        byte[] b = new byte[len >= 0 ? (int) len : (int) Math.min(8192, max + 1)];
        int off = 0;
        while (true) {
            if (off == b.length) {
                if (len >= 0) {
                    return b;
                }
                if (off > max) {
                    throw new IOException("tierd's answer holds more than the " + max + " bytes this call takes");
                }
                b = java.util.Arrays.copyOf(b, (int) Math.min((long) b.length * 2, max + 1));
            }
            int n = in.read(b, off, b.length - off);
            if (n < 0) {
                if (len >= 0) {
                    throw new IOException("the answer ended after " + off + " of its " + len + " bytes");
                }
                return java.util.Arrays.copyOf(b, off);
            }
            off += n;
            if (System.nanoTime() - deadline > 0) {
                throw new TimeoutException("the answer took longer than the timeout");
            }
        }
    }

    private static int millis(Duration d) {
        return (int) Math.max(1, Math.min(Integer.MAX_VALUE, d.toMillis()));
    }

    /**
     * Ends the client: on Java 21 and later, closes its connections now
     * (HttpClient.shutdownNow); before that, they close when idle.
     */
    void close() {
        deadlines.shutdownNow();
        try {
            Method m = HttpClient.class.getMethod("shutdownNow");
            m.invoke(http);
        } catch (ReflectiveOperationException | RuntimeException e) {
            // Java 11-20: nothing to close explicitly.
        }
    }
}
