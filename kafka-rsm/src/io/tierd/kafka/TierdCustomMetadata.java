package io.tierd.kafka;

import java.lang.reflect.Method;
import java.util.Optional;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata.CustomMetadata;

/**
 * The custom metadata tierd answers for a copy and the broker keeps with it
 * (rsmapi/doc.go, "Copy"): 3 bytes, 0x74 ('t'), layout version 1, and a flags
 * byte whose bit 0 says a transaction index was stored and bit 1 a producer
 * snapshot. Also the broker's own {@code isTxnIdxEmpty()} (Kafka 4.0 and later,
 * KAFKA-16780), found by reflection since older brokers lack it.
 */
final class TierdCustomMetadata {
    /** First byte of tierd's custom metadata. */
    static final byte MAGIC = 0x74;
    /** Layout version this plugin reads. */
    static final byte VERSION = 1;
    /** Flags bit: a transaction index was stored. */
    static final int FLAG_TRANSACTION_INDEX = 1;
    /** Flags bit: a producer snapshot was stored. */
    static final int FLAG_PRODUCER_SNAPSHOT = 2;

    private static final ClassValue<Optional<Method>> TXN_IDX_EMPTY = new ClassValue<Optional<Method>>() {
        @Override
        protected Optional<Method> computeValue(Class<?> type) {
            try {
                Method m = type.getMethod("isTxnIdxEmpty");
                return m.getReturnType() == boolean.class ? Optional.of(m) : Optional.empty();
            } catch (NoSuchMethodException | SecurityException e) {
                return Optional.empty();
            }
        }
    };

    private TierdCustomMetadata() {
    }

    /**
     * Whether the copy is known to have no transaction index, so a fetch of it can
     * answer RemoteResourceNotFoundException without asking tierd.
     *
     * @param meta the copy's metadata as the broker holds it
     * @return true if tierd's flags say none was stored, or the broker's isTxnIdxEmpty() says it was empty
     */
    static boolean knownWithoutTransactionIndex(RemoteLogSegmentMetadata meta) {
        Optional<CustomMetadata> cm = meta.customMetadata();
        if (cm != null && cm.isPresent()) {
            byte[] v = cm.get().value();
            if (v != null && v.length == 3 && v[0] == MAGIC && v[1] == VERSION
                    && (v[2] & FLAG_TRANSACTION_INDEX) == 0) {
                return true;
            }
        }
        Optional<Method> m = TXN_IDX_EMPTY.get(meta.getClass());
        if (m.isPresent()) {
            try {
                return (Boolean) m.get().invoke(meta);
            } catch (ReflectiveOperationException | RuntimeException e) {
                return false;
            }
        }
        return false;
    }
}
