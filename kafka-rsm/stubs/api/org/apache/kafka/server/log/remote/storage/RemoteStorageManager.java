package org.apache.kafka.server.log.remote.storage;

import java.io.Closeable;
import java.io.InputStream;
import java.util.Optional;
import org.apache.kafka.common.Configurable;
import org.apache.kafka.common.annotation.InterfaceStability;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata.CustomMetadata;

/**
 * Compile-only stand-in of Kafka's {@code RemoteStorageManager} as Kafka 3.6 to
 * 4.3 define it (KIP-405; the Optional return since KAFKA-15107). Positions are
 * byte positions in the segment's .log, both inclusive.
 */
@InterfaceStability.Evolving
public interface RemoteStorageManager extends Configurable, Closeable {

    /** The per-segment objects {@link #fetchIndex} can return. */
    enum IndexType {
        /** The .index. */
        OFFSET,
        /** The .timeindex. */
        TIMESTAMP,
        /** The producer snapshot. */
        PRODUCER_SNAPSHOT,
        /** The .txnindex. */
        TRANSACTION,
        /** The leader-epoch checkpoint text. */
        LEADER_EPOCH
    }

    /**
     * Copies a rolled segment and its indexes.
     *
     * @param remoteLogSegmentMetadata the copy's metadata
     * @param logSegmentData the files
     * @return custom metadata to store with the copy, if any
     * @throws RemoteStorageException on any failure
     */
    Optional<CustomMetadata> copyLogSegmentData(RemoteLogSegmentMetadata remoteLogSegmentMetadata,
                                                LogSegmentData logSegmentData) throws RemoteStorageException;

    /**
     * @param remoteLogSegmentMetadata the copy
     * @param startPosition first byte, inclusive
     * @return the bytes from startPosition to the end of the segment
     * @throws RemoteStorageException on any failure
     */
    InputStream fetchLogSegment(RemoteLogSegmentMetadata remoteLogSegmentMetadata,
                                int startPosition) throws RemoteStorageException;

    /**
     * @param remoteLogSegmentMetadata the copy
     * @param startPosition first byte, inclusive
     * @param endPosition last byte, inclusive
     * @return the bytes from startPosition to min(endPosition, the segment's end)
     * @throws RemoteStorageException on any failure
     */
    InputStream fetchLogSegment(RemoteLogSegmentMetadata remoteLogSegmentMetadata,
                                int startPosition, int endPosition) throws RemoteStorageException;

    /**
     * @param remoteLogSegmentMetadata the copy
     * @param indexType the object
     * @return its bytes
     * @throws RemoteStorageException on any failure; RemoteResourceNotFoundException when absent
     */
    InputStream fetchIndex(RemoteLogSegmentMetadata remoteLogSegmentMetadata,
                           IndexType indexType) throws RemoteStorageException;

    /**
     * Deletes a copy; idempotent.
     *
     * @param remoteLogSegmentMetadata the copy
     * @throws RemoteStorageException on any failure
     */
    void deleteLogSegmentData(RemoteLogSegmentMetadata remoteLogSegmentMetadata) throws RemoteStorageException;
}
