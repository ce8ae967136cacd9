package org.apache.kafka.server.log.remote.storage;

import java.util.Arrays;
import java.util.Collections;
import java.util.Map;
import java.util.NavigableMap;
import java.util.Objects;
import java.util.Optional;
import java.util.TreeMap;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.annotation.InterfaceStability;

/**
 * Compile-only stand-in of Kafka's {@code RemoteLogSegmentMetadata} (3.6 shape):
 * what the broker's remote log metadata holds about one copy. Offsets are
 * inclusive; the constructor checks them as Kafka's does.
 */
@InterfaceStability.Evolving
public class RemoteLogSegmentMetadata extends RemoteLogMetadata {
    private final RemoteLogSegmentId remoteLogSegmentId;
    private final long startOffset;
    private final long endOffset;
    private final long maxTimestampMs;
    private final NavigableMap<Integer, Long> segmentLeaderEpochs;
    private final int segmentSizeInBytes;
    private final Optional<CustomMetadata> customMetadata;
    private final RemoteLogSegmentState state;

    /**
     * @param remoteLogSegmentId the copy's id
     * @param startOffset the segment's base offset
     * @param endOffset its last offset, inclusive
     * @param maxTimestampMs its largest timestamp, ms
     * @param brokerId the broker that made this metadata
     * @param eventTimestampMs the event time, ms
     * @param segmentSizeInBytes the .log's size, bytes
     * @param customMetadata what the RSM returned from the copy, if anything
     * @param state the copy's state
     * @param segmentLeaderEpochs leader epoch to its start offset within the segment; non-empty
     */
    public RemoteLogSegmentMetadata(RemoteLogSegmentId remoteLogSegmentId, long startOffset, long endOffset,
                                    long maxTimestampMs, int brokerId, long eventTimestampMs,
                                    int segmentSizeInBytes, Optional<CustomMetadata> customMetadata,
                                    RemoteLogSegmentState state, Map<Integer, Long> segmentLeaderEpochs) {
        super(brokerId, eventTimestampMs);
        this.remoteLogSegmentId = Objects.requireNonNull(remoteLogSegmentId, "remoteLogSegmentId can not be null");
        this.state = Objects.requireNonNull(state, "state can not be null");
        if (startOffset < 0) {
            throw new IllegalArgumentException("start offset " + startOffset + " is negative");
        }
        if (endOffset < startOffset) {
            throw new IllegalArgumentException("end offset " + endOffset + " is below start offset " + startOffset);
        }
        if (segmentLeaderEpochs == null || segmentLeaderEpochs.isEmpty()) {
            throw new IllegalArgumentException("segmentLeaderEpochs can not be null or empty");
        }
        this.startOffset = startOffset;
        this.endOffset = endOffset;
        this.maxTimestampMs = maxTimestampMs;
        this.segmentSizeInBytes = segmentSizeInBytes;
        this.customMetadata = Objects.requireNonNull(customMetadata, "customMetadata can not be null");
        this.segmentLeaderEpochs = Collections.unmodifiableNavigableMap(new TreeMap<>(segmentLeaderEpochs));
    }

    /**
     * The metadata of a copy about to start: {@link RemoteLogSegmentState#COPY_SEGMENT_STARTED},
     * no custom metadata.
     *
     * @param remoteLogSegmentId the copy's id
     * @param startOffset the segment's base offset
     * @param endOffset its last offset, inclusive
     * @param maxTimestampMs its largest timestamp, ms
     * @param brokerId the broker
     * @param eventTimestampMs the event time, ms
     * @param segmentSizeInBytes the .log's size, bytes
     * @param segmentLeaderEpochs leader epoch to start offset; non-empty
     */
    public RemoteLogSegmentMetadata(RemoteLogSegmentId remoteLogSegmentId, long startOffset, long endOffset,
                                    long maxTimestampMs, int brokerId, long eventTimestampMs,
                                    int segmentSizeInBytes, Map<Integer, Long> segmentLeaderEpochs) {
        this(remoteLogSegmentId, startOffset, endOffset, maxTimestampMs, brokerId, eventTimestampMs,
                segmentSizeInBytes, Optional.empty(), RemoteLogSegmentState.COPY_SEGMENT_STARTED,
                segmentLeaderEpochs);
    }

    /** @return the copy's id */
    public RemoteLogSegmentId remoteLogSegmentId() {
        return remoteLogSegmentId;
    }

    /** @return the segment's base offset */
    public long startOffset() {
        return startOffset;
    }

    /** @return the segment's last offset, inclusive */
    public long endOffset() {
        return endOffset;
    }

    /** @return the .log's size, bytes */
    public int segmentSizeInBytes() {
        return segmentSizeInBytes;
    }

    /** @return the largest timestamp, ms */
    public long maxTimestampMs() {
        return maxTimestampMs;
    }

    /** @return leader epoch to its start offset */
    public NavigableMap<Integer, Long> segmentLeaderEpochs() {
        return segmentLeaderEpochs;
    }

    /** @return what the RSM returned from the copy, if anything */
    public Optional<CustomMetadata> customMetadata() {
        return customMetadata;
    }

    /** @return the copy's state */
    public RemoteLogSegmentState state() {
        return state;
    }

    @Override
    public TopicIdPartition topicIdPartition() {
        return remoteLogSegmentId.topicIdPartition();
    }

    @Override
    public String toString() {
        return "RemoteLogSegmentMetadata{remoteLogSegmentId=" + remoteLogSegmentId + ", startOffset=" + startOffset
                + ", endOffset=" + endOffset + ", state=" + state + "}";
    }

    /**
     * Bytes an RSM returns from a copy, kept by the broker with the copy's metadata;
     * opaque to the broker, capped by remote.log.metadata.custom.metadata.max.bytes.
     */
    public static class CustomMetadata {
        private final byte[] value;

        /** @param value the bytes */
        public CustomMetadata(byte[] value) {
            this.value = value;
        }

        /** @return the bytes */
        public byte[] value() {
            return value;
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof CustomMetadata && Arrays.equals(value, ((CustomMetadata) o).value);
        }

        @Override
        public int hashCode() {
            return Arrays.hashCode(value);
        }

        @Override
        public String toString() {
            return "CustomMetadata{" + value.length + " bytes}";
        }
    }
}
