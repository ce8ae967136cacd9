package org.apache.kafka.common;

import java.io.Serializable;
import java.util.Objects;

/**
 * Compile-only stand-in of Kafka's {@code TopicPartition}: a topic name and a
 * partition number, printed as {@code <topic>-<partition>}.
 */
public final class TopicPartition implements Serializable {
    private static final long serialVersionUID = 1L;
    private final String topic;
    private final int partition;

    /**
     * @param topic the topic name
     * @param partition the partition number
     */
    public TopicPartition(String topic, int partition) {
        this.topic = topic;
        this.partition = partition;
    }

    /** @return the partition number */
    public int partition() {
        return partition;
    }

    /** @return the topic name */
    public String topic() {
        return topic;
    }

    @Override
    public int hashCode() {
        return Objects.hash(topic, partition);
    }

    @Override
    public boolean equals(Object obj) {
        if (!(obj instanceof TopicPartition)) {
            return false;
        }
        TopicPartition o = (TopicPartition) obj;
        return partition == o.partition && Objects.equals(topic, o.topic);
    }

    @Override
    public String toString() {
        return topic + "-" + partition;
    }
}
