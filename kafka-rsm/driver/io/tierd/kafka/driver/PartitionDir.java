package io.tierd.kafka.driver;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A broker's partition directory {@code <topic>-<partition>}: its segments by
 * base offset (20-digit file names), its producer snapshots, and its
 * {@code leader-epoch-checkpoint} (Kafka's checkpoint text: version 0, a count,
 * then "epoch startOffset" lines).
 */
final class PartitionDir {
    private static final Pattern DIR = Pattern.compile("(.+)-(\\d+)");
    private static final Pattern FILE = Pattern.compile("(\\d{20})\\.(log|snapshot)");

    final Path dir;
    final String topic;
    final int partition;
    /** Base offsets of the .log files, ascending. */
    final List<Long> bases = new ArrayList<>();
    /** Producer snapshots by offset. */
    final NavigableMap<Long, Path> snapshots = new TreeMap<>();
    /** The leader-epoch checkpoint's entries, epoch to start offset, in file order (ascending). */
    final NavigableMap<Integer, Long> epochs = new TreeMap<>();

    PartitionDir(Path dir) throws IOException {
        this.dir = dir;
        Matcher m = DIR.matcher(dir.getFileName().toString());
        if (!m.matches()) {
            throw new IOException(dir + " is not a partition directory <topic>-<partition>");
        }
        topic = m.group(1);
        partition = Integer.parseInt(m.group(2));
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(dir)) {
            for (Path p : ds) {
                Matcher f = FILE.matcher(p.getFileName().toString());
                if (!f.matches()) {
                    continue;
                }
                long off = Long.parseLong(f.group(1));
                if (f.group(2).equals("log")) {
                    bases.add(off);
                } else {
                    snapshots.put(off, p);
                }
            }
        }
        bases.sort(null);
        Path cp = dir.resolve("leader-epoch-checkpoint");
        if (Files.exists(cp)) {
            List<String> lines = Files.readAllLines(cp, StandardCharsets.UTF_8);
            if (lines.size() < 2 || !lines.get(0).trim().equals("0")) {
                throw new IOException(cp + " is not a version 0 leader-epoch checkpoint");
            }
            int n = Integer.parseInt(lines.get(1).trim());
            if (lines.size() < 2 + n) {
                throw new IOException(cp + " names " + n + " entries but holds " + (lines.size() - 2));
            }
            for (int i = 0; i < n; i++) {
                String[] e = lines.get(2 + i).trim().split("\\s+");
                if (e.length != 2) {
                    throw new IOException(cp + " line " + (3 + i) + " is not \"epoch startOffset\"");
                }
                epochs.put(Integer.parseInt(e[0]), Long.parseLong(e[1]));
            }
        }
    }

    /** @return the file of a segment with a suffix (log, index, timeindex, txnindex) */
    Path file(long base, String suffix) {
        return dir.resolve(String.format("%020d.%s", base, suffix));
    }

    /**
     * The segment's leader epochs as the broker puts them in the metadata
     * (LeaderEpochFileCache.epochEntriesInRange(base, next)): entries starting
     * before next, the latest one at or before base moved to start at base.
     *
     * @return epoch to start offset
     */
    NavigableMap<Integer, Long> segmentEpochs(long base, long next) {
        NavigableMap<Integer, Long> out = new TreeMap<>();
        Map.Entry<Integer, Long> atOrBefore = null;
        for (Map.Entry<Integer, Long> e : epochs.entrySet()) {
            if (e.getValue() >= next) {
                break;
            }
            if (e.getValue() <= base) {
                atOrBefore = e;
            } else {
                out.put(e.getKey(), e.getValue());
            }
        }
        if (atOrBefore != null) {
            out.put(atOrBefore.getKey(), base);
        }
        return out;
    }

    /**
     * The leader-epoch bytes the broker gives the copy
     * (epochEntriesAsByteBuffer(epochEntriesInRange(-1, next))): checkpoint text of
     * every entry starting before next.
     *
     * @return the bytes
     */
    ByteBuffer epochCheckpoint(long next) {
        List<String> lines = new ArrayList<>();
        for (Map.Entry<Integer, Long> e : epochs.entrySet()) {
            if (e.getValue() < next) {
                lines.add(e.getKey() + " " + e.getValue());
            }
        }
        StringBuilder sb = new StringBuilder("0\n").append(lines.size()).append('\n');
        for (String l : lines) {
            sb.append(l).append('\n');
        }
        return ByteBuffer.wrap(sb.toString().getBytes(StandardCharsets.UTF_8));
    }

    /**
     * The producer snapshot the driver hands over: the one at the next segment's
     * base offset, as the broker does, else the newest there is; null when there
     * is none (the copy then names a missing file).
     */
    Path snapshotFor(long next) {
        Path p = snapshots.get(next);
        if (p != null) {
            return p;
        }
        Map.Entry<Long, Path> newest = snapshots.lastEntry();
        return newest == null ? null : newest.getValue();
    }
}
