package io.tierd.kafka.driver;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * A walk over a .log's entries by Kafka's framing, which every message format
 * shares: an 8-byte offset and a 4-byte size, then size bytes. For a v2 record
 * batch (magic 2) the offset is the base offset, the last offset is base +
 * lastOffsetDelta (bytes 23-26) and the batch's max timestamp is bytes 35-42;
 * for magic 0 and 1 the offset is the message's own (a compressed wrapper
 * carries its last inner offset) and magic 1's timestamp is bytes 18-25. The
 * walk stops at the first entry that does not fit the file (a zero tail of a
 * preallocated file, or a torn write); it checks no CRC (tierd does).
 */
final class LogScan {
    /** Bytes up to the end of the last whole entry. */
    final long validBytes;
    /** The last offset of the last entry, or -1 when there is none. */
    final long lastOffset;
    /** The largest timestamp seen, ms, or -1 (Kafka's NO_TIMESTAMP). */
    final long maxTimestamp;
    /** Number of entries. */
    final int entries;

    private LogScan(long validBytes, long lastOffset, long maxTimestamp, int entries) {
        this.validBytes = validBytes;
        this.lastOffset = lastOffset;
        this.maxTimestamp = maxTimestamp;
        this.entries = entries;
    }

    static LogScan of(Path log) throws IOException {
        try (FileChannel ch = FileChannel.open(log, StandardOpenOption.READ)) {
            long size = ch.size();
            long pos = 0;
            long last = -1;
            long maxTs = -1;
            int n = 0;
            ByteBuffer head = ByteBuffer.allocate(43);
            while (pos + 17 <= size) {
                head.clear();
                head.limit((int) Math.min(43, size - pos));
                while (head.hasRemaining() && ch.read(head, pos + head.position()) > 0) {
                    // Read the header fully.
                }
                long offset = head.getLong(0);
                int len = head.getInt(8);
                if (len <= 0 || pos + 12 + len > size) {
                    break;
                }
                byte magic = head.get(16);
                if (magic == 2 && len >= 49 && head.limit() >= 43) {
                    last = offset + head.getInt(23);
                    maxTs = Math.max(maxTs, head.getLong(35));
                } else {
                    last = offset;
                    if (magic == 1 && head.limit() >= 26) {
                        maxTs = Math.max(maxTs, head.getLong(18));
                    }
                }
                n++;
                pos += 12 + len;
            }
            return new LogScan(pos, last, maxTs, n);
        }
    }
}
