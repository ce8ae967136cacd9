package org.apache.kafka.server.log.remote.storage;

import java.util.Objects;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.annotation.InterfaceStability;

/**
 * Compile-only stand-in of Kafka's {@code RemoteLogSegmentId}: the partition and
 * a {@link Uuid} the broker makes anew for every copy attempt.
 */
@InterfaceStability.Evolving
public class RemoteLogSegmentId {
    private final TopicIdPartition topicIdPartition;
    private final Uuid id;

    /**
     * @param topicIdPartition the partition
     * @return an id with a new random Uuid
     */
    public static RemoteLogSegmentId generateNew(TopicIdPartition topicIdPartition) {
        return new RemoteLogSegmentId(topicIdPartition, Uuid.randomUuid());
    }

    /**
     * @param topicIdPartition the partition
     * @param id the copy's Uuid
     */
    public RemoteLogSegmentId(TopicIdPartition topicIdPartition, Uuid id) {
        this.topicIdPartition = Objects.requireNonNull(topicIdPartition, "topicIdPartition can not be null");
        this.id = Objects.requireNonNull(id, "id can not be null");
    }

    /** @return the partition */
    public TopicIdPartition topicIdPartition() {
        return topicIdPartition;
    }

    /** @return the copy's Uuid */
    public Uuid id() {
        return id;
    }

    @Override
    public String toString() {
        return "RemoteLogSegmentId{topicIdPartition=" + topicIdPartition + ", id=" + id + "}";
    }

    @Override
    public boolean equals(Object o) {
        if (!(o instanceof RemoteLogSegmentId)) {
            return false;
        }
        RemoteLogSegmentId r = (RemoteLogSegmentId) o;
        return topicIdPartition.equals(r.topicIdPartition) && id.equals(r.id);
    }

    @Override
    public int hashCode() {
        return Objects.hash(topicIdPartition, id);
    }
}
