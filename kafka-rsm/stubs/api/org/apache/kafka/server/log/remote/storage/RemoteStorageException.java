package org.apache.kafka.server.log.remote.storage;

/**
 * Compile-only stand-in of Kafka's checked {@code RemoteStorageException}, the
 * failure of any {@link RemoteStorageManager} call.
 */
public class RemoteStorageException extends Exception {
    private static final long serialVersionUID = 1L;

    /** @param message what failed */
    public RemoteStorageException(String message) {
        super(message);
    }

    /**
     * @param message what failed
     * @param cause the underlying failure
     */
    public RemoteStorageException(String message, Throwable cause) {
        super(message, cause);
    }

    /** @param cause the underlying failure */
    public RemoteStorageException(Throwable cause) {
        super(cause);
    }
}
