package org.apache.kafka.server.log.remote.storage;

/**
 * Compile-only stand-in of Kafka's {@code RemoteResourceNotFoundException}: a
 * segment or one of its indexes is not in remote storage.
 */
public class RemoteResourceNotFoundException extends RemoteStorageException {
    private static final long serialVersionUID = 1L;

    /** @param message what is missing */
    public RemoteResourceNotFoundException(String message) {
        super(message);
    }

    /** @param cause the underlying failure */
    public RemoteResourceNotFoundException(Throwable cause) {
        super("remote resource not found", cause);
    }

    /**
     * @param message what is missing
     * @param cause the underlying failure
     */
    public RemoteResourceNotFoundException(String message, Throwable cause) {
        super(message, cause);
    }
}
