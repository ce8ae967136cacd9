package io.tierd.kafka;

import java.io.IOException;
import java.lang.reflect.Method;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;
import org.apache.kafka.server.log.remote.storage.RemoteStorageException;

/**
 * One HTTP/1.1 client of tierd's RSM endpoint, shared by every call of the
 * plugin (java.net.http's client is thread-safe and pools keep-alive
 * connections). Every request carries {@code Authorization: Bearer <token>}
 * from {@link TokenFile}; an answer 401 makes it re-read the token file and, if
 * the token changed, send the request once more (a rotation whose file change
 * the attribute check missed). Each exchange is bounded by its timeout as a
 * whole, the answer's body included, and its body is read whole, up to a bound
 * of the call's (see {@link BoundedBody}).
 */
final class TierdClient {
    /** Value of the User-Agent header. */
    static final String USER_AGENT = "tierd-kafka-rsm/1";

    final Settings settings;
    private final HttpClient http;
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
                .followRedirects(HttpClient.Redirect.NEVER);
        if (settings.tlsCaFile != null) {
            b.sslContext(TlsTrust.fromPem(settings.tlsCaFile));
        }
        this.http = b.build();
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

    /**
     * Ends the client: on Java 21 and later, closes its connections now
     * (HttpClient.shutdownNow); before that, they close when idle.
     */
    void close() {
        try {
            Method m = HttpClient.class.getMethod("shutdownNow");
            m.invoke(http);
        } catch (ReflectiveOperationException | RuntimeException e) {
            // Java 11-20: nothing to close explicitly.
        }
    }
}
