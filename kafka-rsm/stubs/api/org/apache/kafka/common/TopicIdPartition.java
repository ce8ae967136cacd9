package org.apache.kafka.common;

import java.util.Objects;

/**
 * Compile-only stand-in of Kafka's {@code TopicIdPartition}: a topic id with
 * its {@link TopicPartition}.
 */
public class TopicIdPartition {
    private final Uuid topicId;
    private final TopicPartition topicPartition;

    /**
     * @param topicId the topic id
     * @param topicPartition the topic name and partition
     */
    public TopicIdPartition(Uuid topicId, TopicPartition topicPartition) {
        this.topicId = Objects.requireNonNull(topicId, "topicId can not be null");
        this.topicPartition = Objects.requireNonNull(topicPartition, "topicPartition can not be null");
    }

    /**
     * @param topicId the topic id
     * @param partition the partition number
     * @param topic the topic name
     */
    public TopicIdPartition(Uuid topicId, int partition, String topic) {
        this(topicId, new TopicPartition(topic, partition));
    }

    /** @return the topic id */
    public Uuid topicId() {
        return topicId;
    }

    /** @return the topic name */
    public String topic() {
        return topicPartition.topic();
    }

    /** @return the partition number */
    public int partition() {
        return topicPartition.partition();
    }

    /** @return the topic name and partition */
    public TopicPartition topicPartition() {
        return topicPartition;
    }

    @Override
    public boolean equals(Object o) {
        if (!(o instanceof TopicIdPartition)) {
            return false;
        }
        TopicIdPartition t = (TopicIdPartition) o;
        return topicId.equals(t.topicId) && topicPartition.equals(t.topicPartition);
    }

    @Override
    public int hashCode() {
        return Objects.hash(topicId, topicPartition);
    }

    @Override
    public String toString() {
        return topicId + ":" + topicPartition;
    }
}
