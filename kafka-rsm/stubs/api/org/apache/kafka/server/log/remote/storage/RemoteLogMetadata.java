package org.apache.kafka.server.log.remote.storage;

import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.annotation.InterfaceStability;

/**
 * Compile-only stand-in of Kafka's {@code RemoteLogMetadata}: the broker id and
 * event time every remote log metadata event carries.
 */
@InterfaceStability.Evolving
public abstract class RemoteLogMetadata {
    private final int brokerId;
    private final long eventTimestampMs;

    /**
     * @param brokerId the broker that made the event
     * @param eventTimestampMs the event time, ms since the epoch
     */
    protected RemoteLogMetadata(int brokerId, long eventTimestampMs) {
        this.brokerId = brokerId;
        this.eventTimestampMs = eventTimestampMs;
    }

    /** @return the event time, ms since the epoch */
    public long eventTimestampMs() {
        return eventTimestampMs;
    }

    /** @return the broker that made the event */
    public int brokerId() {
        return brokerId;
    }

    /** @return the partition the event is about */
    public abstract TopicIdPartition topicIdPartition();
}
