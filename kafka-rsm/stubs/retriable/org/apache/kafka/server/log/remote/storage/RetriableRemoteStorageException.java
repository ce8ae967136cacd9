package org.apache.kafka.server.log.remote.storage;

/**
 * Compile-only stand-in of {@code RetriableRemoteStorageException}, which newer
 * Kafka (4.2 and later, KAFKA-19523) adds: a transient failure the broker retries
 * on its next task run. Kept out of the main stand-ins so that tests run both
 * with and without it on the class path.
 */
public class RetriableRemoteStorageException extends RemoteStorageException {
    private static final long serialVersionUID = 1L;

    /** @param message what failed */
    public RetriableRemoteStorageException(String message) {
        super(message);
    }

    /**
     * @param message what failed
     * @param cause the underlying failure
     */
    public RetriableRemoteStorageException(String message, Throwable cause) {
        super(message, cause);
    }

    /** @param cause the underlying failure */
    public RetriableRemoteStorageException(Throwable cause) {
        super(cause);
    }
}
