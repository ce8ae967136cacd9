package rsmtest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
)

// CopySuffixes are the suffixes of the seven objects a segment copy can
// have (see package rsm's object layout), the manifest first.
var CopySuffixes = []string{".manifest.json", ".log", remotelog.OffsetIndex.Suffix(), remotelog.TimeIndex.Suffix(),
	remotelog.TransactionIndex.Suffix(), remotelog.ProducerSnapshot.Suffix(), remotelog.LeaderEpochIndex.Suffix()}

// SeedCopies writes, for each partition of tps, copies finished copies of
// one small segment each (base offsets 0, 10, 20, ...; all seven objects
// of CopySuffixes, a few bytes each) straight into dir, the directory of
// a filesystem bucket (package rsm/filesystem keeps key k in the file
// <dir>/<k>), with m's key layout. It skips the fsyncs of the bucket's
// Upload, so that tests of how a cost grows can build a bucket of
// 100,000 objects in seconds; the files are the ones Upload would leave.
// It returns the copies' COPY_SEGMENT_FINISHED rows, partition by
// partition, oldest first.
func SeedCopies(tb testing.TB, dir string, m *rsm.Manager, tps []remotelog.TopicPartition, copies int) []remotelog.SegmentMetadata {
	tb.Helper()
	var rows []remotelog.SegmentMetadata
	for _, tp := range tps {
		pdir := filepath.Join(dir, filepath.FromSlash(m.PartitionPrefix(tp)))
		if err := os.MkdirAll(pdir, 0o755); err != nil {
			tb.Fatal(err)
		}
		for i := 0; i < copies; i++ {
			meta := remotelog.SegmentMetadata{TopicPartition: tp, ID: remotelog.NewSegmentID(), StartOffset: int64(10 * i),
				EndOffset: int64(10*i + 9), SizeInBytes: 3, State: remotelog.CopySegmentFinished}
			for _, suffix := range CopySuffixes {
				p := filepath.Join(dir, filepath.FromSlash(m.Key(meta, suffix)))
				if err := os.WriteFile(p, []byte(suffix), 0o644); err != nil {
					tb.Fatal(err)
				}
			}
			rows = append(rows, meta)
		}
	}
	return rows
}

// Partitions returns n partitions of topic: topic-0 ... topic-(n-1).
func Partitions(topic string, n int) []remotelog.TopicPartition {
	tps := make([]remotelog.TopicPartition, n)
	for i := range tps {
		tps[i] = remotelog.TopicPartition{Topic: topic, Partition: int32(i)}
	}
	return tps
}
