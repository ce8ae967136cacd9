package org.apache.kafka.common;

import java.util.Map;

/**
 * Compile-only stand-in of Kafka's {@code org.apache.kafka.common.Configurable}
 * (kafka-clients), written from its public signature. Never packaged: at run
 * time the broker's own class is used.
 */
public interface Configurable {
    /**
     * Configures this instance.
     *
     * @param configs the settings, keys as strings, values usually strings
     */
    void configure(Map<String, ?> configs);
}
