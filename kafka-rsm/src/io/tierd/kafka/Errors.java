package io.tierd.kafka;

import java.lang.reflect.Constructor;
import java.lang.reflect.InvocationTargetException;
import java.net.ConnectException;
import java.net.SocketTimeoutException;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.server.log.remote.storage.RemoteResourceNotFoundException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageException;

/**
 * Kafka exceptions for tierd's answers, by the table of rsmapi/doc.go: 404 is
 * {@link RemoteResourceNotFoundException}; 429, 503 and 504, a refused
 * connection and a timeout are "retriable"; anything else is a
 * {@link RemoteStorageException} carrying tierd's {@code error} text.
 *
 * <p>Retriable means Kafka's {@code RetriableRemoteStorageException} (Kafka 4.2
 * and later) when the broker has it, found by name through the class loader of
 * {@link RemoteStorageException} (the broker's, since the plugin's class loader
 * delegates Kafka's types), else a plain RemoteStorageException, which older
 * brokers treat the same way (the task runs again after its interval).
 *
 * <p>Other transport failures (a connection reset or closed mid-answer) are not
 * retriable on purpose: on every Kafka version that has a clean-up path, the
 * broker then deletes the failed copy attempt, which removes whatever a tierd
 * that died mid-copy left behind.
 */
final class Errors {
    /** The class newer Kafka defines for transient remote storage failures. */
    static final String RETRIABLE_CLASS = "org.apache.kafka.server.log.remote.storage.RetriableRemoteStorageException";

    private static final int MAX_TEXT = 1000;
    private static final Constructor<? extends RemoteStorageException> RETRIABLE_WITH_CAUSE = retriableConstructor(true);
    private static final Constructor<? extends RemoteStorageException> RETRIABLE = retriableConstructor(false);

    private Errors() {
    }

    private static Constructor<? extends RemoteStorageException> retriableConstructor(boolean withCause) {
        try {
            Class<?> c = Class.forName(RETRIABLE_CLASS, false, RemoteStorageException.class.getClassLoader());
            if (!RemoteStorageException.class.isAssignableFrom(c)) {
                return null;
            }
            Class<? extends RemoteStorageException> rc = c.asSubclass(RemoteStorageException.class);
            return withCause ? rc.getConstructor(String.class, Throwable.class) : rc.getConstructor(String.class);
        } catch (ReflectiveOperationException | LinkageError | SecurityException e) {
            return null;
        }
    }

    /** @return whether the broker has RetriableRemoteStorageException */
    static boolean retriableAvailable() {
        return RETRIABLE_WITH_CAUSE != null || RETRIABLE != null;
    }

    /**
     * @param message what failed
     * @param cause the underlying failure, or null
     * @return a RetriableRemoteStorageException where the broker has it, else a RemoteStorageException
     */
    static RemoteStorageException retriable(String message, Throwable cause) {
        try {
            if (RETRIABLE_WITH_CAUSE != null) {
                return RETRIABLE_WITH_CAUSE.newInstance(message, cause);
            }
            if (RETRIABLE != null) {
                RemoteStorageException e = RETRIABLE.newInstance(message);
                if (cause != null) {
                    e.initCause(cause);
                }
                return e;
            }
        } catch (InstantiationException | IllegalAccessException | InvocationTargetException e) {
            // Fall through to the plain exception.
        }
        return new RemoteStorageException(message, cause);
    }

    /**
     * Restores the thread's interrupt flag and makes the exception for an interrupted call.
     *
     * @param what the call
     * @param e the interrupt
     * @return a RemoteStorageException
     */
    static RemoteStorageException interrupted(String what, InterruptedException e) {
        Thread.currentThread().interrupt();
        return new RemoteStorageException(what + ": interrupted", e);
    }

    /**
     * @param what the call
     * @param timeout the time it was given
     * @param cause the timeout's exception
     * @return a retriable exception
     */
    static RemoteStorageException timeout(String what, Duration timeout, Throwable cause) {
        return retriable(what + ": tierd did not answer within " + timeout.toMillis() + " ms", cause);
    }

    /**
     * The exception for a failure to exchange a request with tierd at all.
     *
     * @param what the call
     * @param endpoint tierd's endpoint, for the message
     * @param t the failure
     * @param timeout the time the call was given
     * @return a retriable exception for a refused connection or a timeout, else a RemoteStorageException
     */
    static RemoteStorageException transport(String what, String endpoint, Throwable t, Duration timeout) {
        Throwable c = t;
        for (int depth = 0; c != null && depth < 16; depth++, c = c.getCause()) {
            if (c instanceof ConnectException) {
                return retriable(what + ": cannot connect to tierd at " + endpoint + " (" + describe(c) + ")", t);
            }
            if (c instanceof HttpTimeoutException || c instanceof TimeoutException || c instanceof SocketTimeoutException) {
                return timeout(what, timeout, t);
            }
        }
        return new RemoteStorageException(what + ": exchange with tierd at " + endpoint + " failed: " + describe(t), t);
    }

    /**
     * The exception for an answer that is not a success.
     *
     * @param what the call
     * @param status the HTTP status
     * @param body the answer's body: tierd's {"error": ..., "reason": ...}
     * @return the exception the table of rsmapi/doc.go gives
     */
    static RemoteStorageException forStatus(String what, int status, byte[] body) {
        String text = errorText(body);
        String msg = what + ": tierd answered " + status + text;
        if (status == 404) {
            return new RemoteResourceNotFoundException(msg);
        }
        if (status == 429 || status == 503 || status == 504) {
            return retriable(msg, null);
        }
        return new RemoteStorageException(msg);
    }

    /** @return " REASON: error" from tierd's JSON error body, or a cleaned snippet of another body */
    static String errorText(byte[] body) {
        if (body == null || body.length == 0) {
            return "";
        }
        String s = new String(body, StandardCharsets.UTF_8);
        try {
            Object v = Json.parse(s);
            if (v instanceof Map) {
                Map<?, ?> m = (Map<?, ?>) v;
                Object reason = m.get("reason");
                Object error = m.get("error");
                StringBuilder sb = new StringBuilder();
                if (reason instanceof String) {
                    sb.append(' ').append(clean((String) reason));
                }
                if (error instanceof String) {
                    sb.append(": ").append(clean((String) error));
                }
                if (sb.length() > 0) {
                    return sb.toString();
                }
            }
        } catch (IllegalArgumentException e) {
            // Not tierd's JSON (a proxy's page, say): show its start.
        }
        return ": " + clean(s);
    }

    private static String clean(String s) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < s.length() && sb.length() < MAX_TEXT; i++) {
            char c = s.charAt(i);
            sb.append(c < 0x20 || c == 0x7f ? ' ' : c);
        }
        return sb.toString().trim();
    }

    private static String describe(Throwable t) {
        String m = t.getMessage();
        return m == null || m.isEmpty() ? t.getClass().getSimpleName() : t.getClass().getSimpleName() + ": " + m;
    }
}
