package org.apache.kafka.server.log.remote.storage;

import org.apache.kafka.common.annotation.InterfaceStability;

/**
 * Compile-only stand-in of Kafka's {@code RemoteLogSegmentState}: the life cycle
 * of a copy in the broker's remote log metadata, with Kafka's ids.
 */
@InterfaceStability.Evolving
public enum RemoteLogSegmentState {
    /** The copy is under way. */
    COPY_SEGMENT_STARTED((byte) 0),
    /** The copy is complete and may be read. */
    COPY_SEGMENT_FINISHED((byte) 1),
    /** The delete is under way. */
    DELETE_SEGMENT_STARTED((byte) 2),
    /** The delete is complete. */
    DELETE_SEGMENT_FINISHED((byte) 3);

    private final byte id;

    RemoteLogSegmentState(byte id) {
        this.id = id;
    }

    /** @return the state's id as Kafka serialises it */
    public byte id() {
        return id;
    }

    /**
     * @param id a state id
     * @return the state with that id, or null
     */
    public static RemoteLogSegmentState forId(byte id) {
        for (RemoteLogSegmentState s : values()) {
            if (s.id == id) {
                return s;
            }
        }
        return null;
    }
}
