package org.apache.kafka.server.log.remote.storage;

import java.io.Closeable;
import java.io.InputStream;
import java.util.Optional;
import org.apache.kafka.common.Configurable;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata.CustomMetadata;

/**
 * Compile-only stand-in of the newest {@code RemoteStorageManager} shape
 * (KIP-1333): {@code long} fetch overloads as default methods that delegate to
 * the {@code int} ones when the values fit, and the {@code int} overloads
 * deprecated defaults that throw unless overridden. Used only to check that the
 * plugin links against this shape too; it replaces the 3.6 shape on the class
 * path of that check.
 */
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
     * @param remoteLogSegmentMetadata the copy's metadata
     * @param logSegmentData the files
     * @return custom metadata, if any
     * @throws RemoteStorageException on any failure
     */
    Optional<CustomMetadata> copyLogSegmentData(RemoteLogSegmentMetadata remoteLogSegmentMetadata,
                                                LogSegmentData logSegmentData) throws RemoteStorageException;

    /**
     * @param remoteLogSegmentMetadata the copy
     * @param startPosition first byte, inclusive
     * @return the bytes to the end
     * @throws RemoteStorageException on any failure
     * @deprecated use the long overload
     */
    @Deprecated
    default InputStream fetchLogSegment(RemoteLogSegmentMetadata remoteLogSegmentMetadata,
                                        int startPosition) throws RemoteStorageException {
        throw new UnsupportedOperationException("fetchLogSegment(int) is not implemented");
    }

    /**
     * @param remoteLogSegmentMetadata the copy
     * @param startPosition first byte, inclusive
     * @param endPosition last byte, inclusive
     * @return the bytes
     * @throws RemoteStorageException on any failure
     * @deprecated use the long overload
     */
    @Deprecated
    default InputStream fetchLogSegment(RemoteLogSegmentMetadata remoteLogSegmentMetadata,
                                        int startPosition, int endPosition) throws RemoteStorageException {
        throw new UnsupportedOperationException("fetchLogSegment(int, int) is not implemented");
    }

    /**
     * @param remoteLogSegmentMetadata the copy
     * @param startPosition first byte, inclusive
     * @return the bytes to the end
     * @throws RemoteStorageException on any failure
     */
    @SuppressWarnings("deprecation")
    default InputStream fetchLogSegment(RemoteLogSegmentMetadata remoteLogSegmentMetadata,
                                        long startPosition) throws RemoteStorageException {
        return fetchLogSegment(remoteLogSegmentMetadata, Math.toIntExact(startPosition));
    }

    /**
     * @param remoteLogSegmentMetadata the copy
     * @param startPosition first byte, inclusive
     * @param endPosition last byte, inclusive
     * @return the bytes
     * @throws RemoteStorageException on any failure
     */
    @SuppressWarnings("deprecation")
    default InputStream fetchLogSegment(RemoteLogSegmentMetadata remoteLogSegmentMetadata,
                                        long startPosition, long endPosition) throws RemoteStorageException {
        return fetchLogSegment(remoteLogSegmentMetadata, Math.toIntExact(startPosition),
                (int) Math.min(endPosition, Integer.MAX_VALUE));
    }

    /**
     * @param remoteLogSegmentMetadata the copy
     * @param indexType the object
     * @return its bytes
     * @throws RemoteStorageException on any failure
     */
    InputStream fetchIndex(RemoteLogSegmentMetadata remoteLogSegmentMetadata,
                           IndexType indexType) throws RemoteStorageException;

    /**
     * @param remoteLogSegmentMetadata the copy
     * @throws RemoteStorageException on any failure
     */
    void deleteLogSegmentData(RemoteLogSegmentMetadata remoteLogSegmentMetadata) throws RemoteStorageException;
}
