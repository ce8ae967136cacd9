package io.tierd.kafka;

import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteStorageException;

/**
 * A copy's address on the wire (rsmapi/doc.go, "Addressing a copy"):
 * {@code /v1/segments/{topic}/{partition}/{startOffset}/{segmentId}}, from the
 * broker's RemoteLogSegmentMetadata alone, with the segment id as Kafka prints
 * a Uuid.
 */
final class SegmentRef {
    /** Kafka's longest topic name, characters. */
    private static final int MAX_TOPIC = 249;

    final String topic;
    final int partition;
    final long startOffset;
    final String segmentId;

    private SegmentRef(String topic, int partition, long startOffset, String segmentId) {
        this.topic = topic;
        this.partition = partition;
        this.startOffset = startOffset;
        this.segmentId = segmentId;
    }

    /**
     * @param meta the broker's metadata of the copy
     * @return its address
     * @throws RemoteStorageException if the topic is not a Kafka topic name (so it would need escaping)
     */
    static SegmentRef of(RemoteLogSegmentMetadata meta) throws RemoteStorageException {
        if (meta == null) {
            throw new NullPointerException("remoteLogSegmentMetadata can not be null");
        }
        TopicIdPartition tp = meta.remoteLogSegmentId().topicIdPartition();
        String topic = tp.topic();
        if (!validTopic(topic)) {
            throw new RemoteStorageException("topic name \"" + topic + "\" is not a Kafka topic name ([a-zA-Z0-9._-], 1 to "
                    + MAX_TOPIC + " characters)");
        }
        return new SegmentRef(topic, tp.partition(), meta.startOffset(), meta.remoteLogSegmentId().id().toString());
    }

    private static boolean validTopic(String t) {
        if (t == null || t.isEmpty() || t.length() > MAX_TOPIC) {
            return false;
        }
        for (int i = 0; i < t.length(); i++) {
            char c = t.charAt(i);
            if (!(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-')) {
                return false;
            }
        }
        return true;
    }

    /** @return the copy's path C, without the endpoint's own path */
    String path() {
        return "/v1/segments/" + topic + "/" + partition + "/" + startOffset + "/" + segmentId;
    }

    @Override
    public String toString() {
        return topic + "-" + partition + " segment " + startOffset + " (id " + segmentId + ")";
    }
}
