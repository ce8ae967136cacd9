package org.apache.kafka.server.log.remote.storage;

import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.Objects;
import java.util.Optional;
import org.apache.kafka.common.annotation.InterfaceStability;

/**
 * Compile-only stand-in of Kafka's {@code LogSegmentData}: the files of a rolled
 * segment that {@link RemoteStorageManager#copyLogSegmentData} copies, and the
 * partition's leader-epoch history as checkpoint text. Every argument is
 * required (the transaction index as a non-null Optional), as in Kafka.
 */
@InterfaceStability.Evolving
public class LogSegmentData {
    private final Path logSegment;
    private final Path offsetIndex;
    private final Path timeIndex;
    private final Optional<Path> transactionIndex;
    private final Path producerSnapshotIndex;
    private final ByteBuffer leaderEpochIndex;

    /**
     * @param logSegment the segment's .log
     * @param offsetIndex its .index
     * @param timeIndex its .timeindex
     * @param transactionIndex its .txnindex, if the file exists
     * @param producerSnapshotIndex the producer snapshot at the next segment's base offset
     * @param leaderEpochIndex the leader-epoch checkpoint text
     */
    public LogSegmentData(Path logSegment, Path offsetIndex, Path timeIndex, Optional<Path> transactionIndex,
                          Path producerSnapshotIndex, ByteBuffer leaderEpochIndex) {
        this.logSegment = Objects.requireNonNull(logSegment, "logSegment can not be null");
        this.offsetIndex = Objects.requireNonNull(offsetIndex, "offsetIndex can not be null");
        this.timeIndex = Objects.requireNonNull(timeIndex, "timeIndex can not be null");
        this.transactionIndex = Objects.requireNonNull(transactionIndex, "transactionIndex can not be null");
        this.producerSnapshotIndex = Objects.requireNonNull(producerSnapshotIndex, "producerSnapshotIndex can not be null");
        this.leaderEpochIndex = Objects.requireNonNull(leaderEpochIndex, "leaderEpochIndex can not be null");
    }

    /** @return the .log */
    public Path logSegment() {
        return logSegment;
    }

    /** @return the .index */
    public Path offsetIndex() {
        return offsetIndex;
    }

    /** @return the .timeindex */
    public Path timeIndex() {
        return timeIndex;
    }

    /** @return the .txnindex, if any */
    public Optional<Path> transactionIndex() {
        return transactionIndex;
    }

    /** @return the producer snapshot */
    public Path producerSnapshotIndex() {
        return producerSnapshotIndex;
    }

    /** @return the leader-epoch checkpoint text */
    public ByteBuffer leaderEpochIndex() {
        return leaderEpochIndex;
    }
}
