package io.tierd.kafka.driver;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.NavigableMap;
import java.util.Optional;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.server.log.remote.storage.LogSegmentData;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentId;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata.CustomMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentState;

/**
 * One segment of a partition directory, with the metadata and LogSegmentData the
 * broker's RemoteLogManager builds for its copy (RLMCopyTask.copyLogSegment):
 * start offset = base offset, end offset = next segment's base offset - 1,
 * max timestamp, the segment's leader epochs, size = the .log's size, and the
 * files by path with the leader-epoch checkpoint bytes.
 */
final class BrokerSegment {
    final PartitionDir pd;
    final long base;
    /** The next segment's base offset (for the last segment: its last offset + 1). */
    final long next;
    final Path log;
    final Path index;
    final Path timeIndex;
    /** The .txnindex, or null when there is none. */
    final Path txnIndex;
    /** The producer snapshot handed over; may name a missing file. */
    final Path snapshot;
    final LogScan scan;
    final long fileSize;

    private BrokerSegment(PartitionDir pd, long base, long next, LogScan scan, Path snapshot) throws IOException {
        this.pd = pd;
        this.base = base;
        this.next = next;
        this.log = pd.file(base, "log");
        this.index = pd.file(base, "index");
        this.timeIndex = pd.file(base, "timeindex");
        Path txn = pd.file(base, "txnindex");
        this.txnIndex = Files.exists(txn) ? txn : null;
        this.snapshot = snapshot;
        this.scan = scan;
        this.fileSize = Files.size(log);
    }

    /**
     * The segments to copy: every rolled one (all but the highest base offset), or
     * with all also the last, whose end offset comes from a scan of its entries.
     *
     * @throws IOException when a file the broker always has (.index, .timeindex) is missing
     */
    static List<BrokerSegment> of(PartitionDir pd, boolean all) throws IOException {
        List<BrokerSegment> out = new ArrayList<>();
        int n = pd.bases.size();
        for (int i = 0; i < n; i++) {
            long base = pd.bases.get(i);
            boolean last = i == n - 1;
            if (last && !all) {
                break;
            }
            out.add(of(pd, base, last ? -1 : pd.bases.get(i + 1)));
        }
        return out;
    }

    /**
     * @param next the next segment's base offset, or -1 to take the scanned last offset + 1
     */
    static BrokerSegment of(PartitionDir pd, long base, long next) throws IOException {
        Path log = pd.file(base, "log");
        if (!Files.exists(log)) {
            throw new IOException("no segment " + log);
        }
        for (String s : new String[] {"index", "timeindex"}) {
            if (!Files.exists(pd.file(base, s))) {
                throw new IOException("no " + pd.file(base, s) + " (the broker passes an index for every rolled segment)");
            }
        }
        LogScan scan = LogScan.of(log);
        if (next < 0) {
            if (scan.lastOffset < base) {
                throw new IOException(log + " holds no entry, so it has no end offset");
            }
            next = scan.lastOffset + 1;
        }
        Path snap = pd.snapshotFor(next);
        if (snap == null) {
            snap = pd.dir.resolve(String.format("%020d.snapshot", next));
        }
        return new BrokerSegment(pd, base, next, scan, snap);
    }

    /** @return "topic-partition@base" */
    String name() {
        return pd.topic + "-" + pd.partition + "@" + base;
    }

    /** @return whether a producer snapshot file exists to hand over */
    boolean hasSnapshot() {
        return Files.exists(snapshot);
    }

    /**
     * The metadata of a new copy attempt, COPY_SEGMENT_STARTED, as the broker makes it.
     *
     * @param topicId the partition's topic id
     * @param id the segment id (a new random one per attempt, unless a test names it)
     * @throws IOException when the dir has no leader epoch for the segment (the metadata needs one)
     */
    RemoteLogSegmentMetadata metadata(Uuid topicId, Uuid id, int brokerId) throws IOException {
        NavigableMap<Integer, Long> epochs = pd.segmentEpochs(base, next);
        if (epochs.isEmpty()) {
            throw new IOException(pd.dir + " has no leader-epoch-checkpoint entry for offsets " + base + " to " + (next - 1));
        }
        if (fileSize > Integer.MAX_VALUE) {
            throw new IOException(log + " is larger than a segment can be (" + fileSize + " bytes)");
        }
        RemoteLogSegmentId rid = new RemoteLogSegmentId(new TopicIdPartition(topicId, pd.partition, pd.topic), id);
        return new RemoteLogSegmentMetadata(rid, base, next - 1, scan.maxTimestamp, brokerId, System.currentTimeMillis(),
                (int) fileSize, epochs);
    }

    /** @return the metadata after the copy, as the broker keeps it: COPY_SEGMENT_FINISHED with the custom metadata */
    static RemoteLogSegmentMetadata finished(RemoteLogSegmentMetadata m, Optional<CustomMetadata> cm) {
        return new RemoteLogSegmentMetadata(m.remoteLogSegmentId(), m.startOffset(), m.endOffset(), m.maxTimestampMs(),
                m.brokerId(), System.currentTimeMillis(), m.segmentSizeInBytes(), cm,
                RemoteLogSegmentState.COPY_SEGMENT_FINISHED, m.segmentLeaderEpochs());
    }

    /** @return the leader-epoch bytes the broker hands over */
    ByteBuffer epochCheckpoint() {
        return pd.epochCheckpoint(next);
    }

    /** @return the files as the broker hands them over, with these epoch bytes */
    LogSegmentData data(ByteBuffer epochs) {
        return new LogSegmentData(log, index, timeIndex, Optional.ofNullable(txnIndex), snapshot, epochs);
    }
}
