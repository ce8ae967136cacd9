package org.apache.kafka.common;

import java.nio.ByteBuffer;
import java.util.Base64;
import java.util.UUID;

/**
 * Compile-only stand-in of Kafka's {@code Uuid}: 128 bits, printed as the URL-safe
 * base64 of its 16 big-endian bytes without padding (22 characters), as Kafka's
 * {@code Uuid.toString} does.
 */
public class Uuid implements Comparable<Uuid> {
    /** The all-zero id. */
    public static final Uuid ZERO_UUID = new Uuid(0L, 0L);

    private final long mostSignificantBits;
    private final long leastSignificantBits;

    /**
     * @param mostSigBits the high 64 bits
     * @param leastSigBits the low 64 bits
     */
    public Uuid(long mostSigBits, long leastSigBits) {
        this.mostSignificantBits = mostSigBits;
        this.leastSignificantBits = leastSigBits;
    }

    /**
     * A random id; like Kafka's, never the zero id and never one whose text starts
     * with '-'.
     *
     * @return a new random id
     */
    public static Uuid randomUuid() {
        while (true) {
            UUID u = UUID.randomUUID();
            Uuid id = new Uuid(u.getMostSignificantBits(), u.getLeastSignificantBits());
            if (!id.equals(ZERO_UUID) && !id.toString().startsWith("-")) {
                return id;
            }
        }
    }

    /** @return the high 64 bits */
    public long getMostSignificantBits() {
        return mostSignificantBits;
    }

    /** @return the low 64 bits */
    public long getLeastSignificantBits() {
        return leastSignificantBits;
    }

    @Override
    public boolean equals(Object obj) {
        if (!(obj instanceof Uuid)) {
            return false;
        }
        Uuid o = (Uuid) obj;
        return mostSignificantBits == o.mostSignificantBits && leastSignificantBits == o.leastSignificantBits;
    }

    @Override
    public int hashCode() {
        long x = mostSignificantBits ^ leastSignificantBits;
        return (int) (x >> 32) ^ (int) x;
    }

    @Override
    public String toString() {
        ByteBuffer b = ByteBuffer.allocate(16);
        b.putLong(mostSignificantBits).putLong(leastSignificantBits);
        return Base64.getUrlEncoder().withoutPadding().encodeToString(b.array());
    }

    /**
     * Parses the 22-character text {@link #toString} makes.
     *
     * @param str URL-safe base64 of 16 bytes, without padding
     * @return the id
     * @throws IllegalArgumentException if str is not 16 bytes of URL-safe base64
     */
    public static Uuid fromString(String str) {
        byte[] raw = Base64.getUrlDecoder().decode(str);
        if (raw.length != 16) {
            throw new IllegalArgumentException("not a Kafka Uuid (16 bytes of URL-safe base64): " + str);
        }
        ByteBuffer b = ByteBuffer.wrap(raw);
        return new Uuid(b.getLong(), b.getLong());
    }

    @Override
    public int compareTo(Uuid other) {
        int c = Long.compare(mostSignificantBits, other.mostSignificantBits);
        return c != 0 ? c : Long.compare(leastSignificantBits, other.leastSignificantBits);
    }
}
