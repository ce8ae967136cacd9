package io.tierd.kafka;

import java.io.IOException;
import java.io.InputStream;
import java.io.InterruptedIOException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageException;

/**
 * The stream {@code fetchLogSegment} returns: bytes [start, end] of a copy's
 * .log (end inclusive, or to the end of the segment), read in bounded windows,
 * each one ranged request read whole before it is served. So a stream that is
 * never closed holds no connection and at most one window of memory, and an
 * early close wastes at most one window. The window starts at
 * {@code tierd.fetch.window.bytes} and doubles up to
 * {@code tierd.fetch.window.max.bytes}. The first window is read by
 * {@link #open}, so that a missing copy fails the fetch call itself. Not
 * thread-safe (no InputStream is).
 */
final class RangeInputStream extends InputStream {
    /** One ranged read. */
    interface Source {
        /**
         * @param first first byte, inclusive
         * @param last last byte, inclusive; past the end means to the end
         * @return the bytes [first, min(last, size-1)] and the object's size
         * @throws RemoteStorageException as the fetch's error mapping says
         */
        Window read(long first, long last) throws RemoteStorageException;
    }

    /** The answer of one ranged read. */
    static final class Window {
        final byte[] bytes;
        /** The whole object's size, bytes. */
        final long objectSize;

        Window(byte[] bytes, long objectSize) {
            this.bytes = bytes;
            this.objectSize = objectSize;
        }
    }

    private final Source source;
    private final long last;
    private final long objectSize;
    private final int maxWindow;
    private int window;
    private byte[] buf;
    private int bufPos;
    /** Position of the first byte after the buffer. */
    private long next;
    private boolean closed;

    private RangeInputStream(Source source, long start, long end, int window, int maxWindow, Window first) {
        this.source = source;
        this.maxWindow = maxWindow;
        this.window = grow(window, maxWindow);
        this.objectSize = first.objectSize;
        this.last = Math.min(end, first.objectSize - 1);
        this.buf = first.bytes;
        this.next = start + first.bytes.length;
    }

    /**
     * Reads the first window and returns the stream.
     *
     * @param source the ranged reader
     * @param start first byte, inclusive, at least 0
     * @param end last byte, inclusive, at least start ({@code Long.MAX_VALUE} for the end of the segment)
     * @param window the first window, bytes
     * @param maxWindow the largest window, bytes
     * @return the stream
     * @throws RemoteStorageException from the first read
     */
    static RangeInputStream open(Source source, long start, long end, int window, int maxWindow)
            throws RemoteStorageException {
        Window first = source.read(start, lastOf(start, window, end));
        return new RangeInputStream(source, start, end, window, maxWindow, first);
    }

    private static long lastOf(long first, int window, long end) {
        long l = first + window - 1;
        return l < first ? end : Math.min(l, end);
    }

    private static int grow(int w, int max) {
        return (int) Math.min((long) w * 2, max);
    }

    /** @return whether there is a byte to serve, reading the next window if need be */
    private boolean fill() throws IOException {
        if (closed) {
            throw new IOException("stream closed");
        }
        if (buf != null && bufPos < buf.length) {
            return true;
        }
        buf = null;
        bufPos = 0;
        if (next > last) {
            return false;
        }
        Window w;
        try {
            w = source.read(next, lastOf(next, window, last));
        } catch (RemoteStorageException e) {
            if (Thread.currentThread().isInterrupted()) {
                InterruptedIOException ie = new InterruptedIOException(e.getMessage());
                ie.initCause(e);
                throw ie;
            }
            throw new IOException(e.getMessage(), e);
        }
        if (w.objectSize != objectSize) {
            throw new IOException("the copy changed during the read: its .log was " + objectSize + " bytes, now "
                    + w.objectSize);
        }
        if (w.bytes.length == 0) {
            throw new IOException("tierd answered no bytes at position " + next + " of a " + w.objectSize
                    + "-byte segment expected to reach position " + last);
        }
        window = grow(window, maxWindow);
        buf = w.bytes;
        next += w.bytes.length;
        return true;
    }

    @Override
    public int read() throws IOException {
        if (!fill()) {
            return -1;
        }
        return buf[bufPos++] & 0xff;
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
        if (off < 0 || len < 0 || len > b.length - off) {
            throw new IndexOutOfBoundsException();
        }
        if (len == 0) {
            return 0;
        }
        if (!fill()) {
            return -1;
        }
        int n = Math.min(len, buf.length - bufPos);
        System.arraycopy(buf, bufPos, b, off, n);
        bufPos += n;
        return n;
    }

    /** Skips within the buffer, and past it without reading the skipped bytes. */
    @Override
    public long skip(long n) throws IOException {
        if (closed) {
            throw new IOException("stream closed");
        }
        if (n <= 0) {
            return 0;
        }
        long inBuf = buf == null ? 0 : buf.length - bufPos;
        if (n <= inBuf) {
            bufPos += (int) n;
            return n;
        }
        long skipped = inBuf + Math.min(n - inBuf, Math.max(0, last + 1 - next));
        next += skipped - inBuf;
        buf = null;
        bufPos = 0;
        return skipped;
    }

    @Override
    public int available() {
        return closed || buf == null ? 0 : buf.length - bufPos;
    }

    /** Drops the buffered window; nothing else is held. */
    @Override
    public void close() {
        closed = true;
        buf = null;
    }

    /** @return the bytes held now (at most one window), for tests */
    int bufferedBytes() {
        return buf == null ? 0 : buf.length;
    }
}
