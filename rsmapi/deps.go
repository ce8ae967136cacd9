package rsmapi

import (
	"context"
	"io"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
)

// Catalogue is what the endpoint needs from the metadata store
// (rlmm.Store): the rows of broker-owned copies, in a key space of their
// own that tierd's copier never reads. Rows follow Kafka's
// RemoteLogSegmentState transitions (remotelog.CheckTransition). Errors:
// rlmm.ErrSegmentNotFound (wrapped) for a missing row,
// remotelog.ErrIllegalTransition (wrapped), rlmm.ErrUnavailable
// (wrapped) while the store takes no writes.
type Catalogue interface {
	// PutBrokerCopy writes meta's row, in the state it carries, over any
	// row of the same partition, start offset and segment id.
	PutBrokerCopy(meta remotelog.SegmentMetadata) error
	// SetBrokerCopyState moves a row to state to and returns it as
	// written (on error, as read).
	SetBrokerCopyState(tp remotelog.TopicPartition, start int64, id remotelog.SegmentID, to remotelog.SegmentState) (remotelog.SegmentMetadata, error)
	// BrokerCopy returns one row.
	BrokerCopy(tp remotelog.TopicPartition, start int64, id remotelog.SegmentID) (remotelog.SegmentMetadata, error)
	// BrokerCopies returns a partition's rows, by start offset.
	BrokerCopies(tp remotelog.TopicPartition) ([]remotelog.SegmentMetadata, error)
	// BrokerPartitions lists the partitions that have rows.
	BrokerPartitions() ([]remotelog.TopicPartition, error)
	// ForgetBrokerCopy removes a row (a missing one is not an error).
	ForgetBrokerCopy(tp remotelog.TopicPartition, start int64, id remotelog.SegmentID) error
	// PurgeBrokerCopies removes a partition's DELETE_SEGMENT_FINISHED
	// rows whose event time is before beforeMs, and returns how many.
	PurgeBrokerCopies(tp remotelog.TopicPartition, beforeMs int64) (int, error)
}

// Storage is what the endpoint needs from the object store: package rsm's
// Manager over the broker prefix (<bucket.prefix>/<rsm.prefix>), adapted
// by NewStorage. Errors: rsm.ErrNotFound (wrapped) for a missing object;
// others are the store's.
type Storage interface {
	// Copy uploads one segment's files for the COPY_SEGMENT_STARTED row
	// meta, every object read through files' handles, the manifest last,
	// and returns the manifest. On error the objects it stored are
	// deleted (best effort).
	Copy(ctx context.Context, meta remotelog.SegmentMetadata, files *Files) (*rsm.Manifest, error)
	// VerifyPresent checks every object of the manifest stored at its size.
	VerifyPresent(ctx context.Context, mf *rsm.Manifest) error
	// Delete deletes every object of the copy by key, the manifest first;
	// missing objects are fine.
	Delete(ctx context.Context, meta remotelog.SegmentMetadata) error
	// AbortUploads aborts the copy's incomplete multipart uploads, each by
	// its exact key, and returns how many it aborted.
	AbortUploads(ctx context.Context, meta remotelog.SegmentMetadata) (int, error)
	// Manifest reads the copy's manifest (its key follows from meta).
	Manifest(ctx context.Context, meta remotelog.SegmentMetadata) (*rsm.Manifest, error)
	// FetchIndex reads one index object whole; an absent optional one
	// (meta says so) is nil and no error.
	FetchIndex(ctx context.Context, meta remotelog.SegmentMetadata, t remotelog.IndexType) ([]byte, error)
	// FetchLogSegment reads bytes [start, end) of the copy's .log.
	FetchLogSegment(ctx context.Context, meta remotelog.SegmentMetadata, start, end int64) (io.ReadCloser, error)
	// Partitions lists the partitions with objects under the prefix.
	Partitions(ctx context.Context) ([]remotelog.TopicPartition, error)
	// Manifests lists a partition's manifests, oldest first; unreadable
	// ones are errors after the rest.
	Manifests(ctx context.Context, tp remotelog.TopicPartition) ([]*rsm.Manifest, error)
	// Key returns the key of one object of a copy (for messages).
	Key(meta remotelog.SegmentMetadata, suffix string) string
}

// LogReader reads a copy's .log for GET C/log: remoteread.Engine.WriteLogRange
// over the broker copies' rsm.Manager, through tierd's chunk cache with
// read-ahead for sequential windows. WriteLogRange writes bytes [start,
// start+n) of the copy's .log to w (meta.SizeInBytes is the object's
// size) and returns how many it wrote; fewer than n only with an error.
type LogReader interface {
	WriteLogRange(ctx context.Context, meta remotelog.SegmentMetadata, start, n int64, w io.Writer) (int64, error)
}

// directReader is the LogReader without a cache: one ranged GET per read.
type directReader struct{ st Storage }

func (d directReader) WriteLogRange(ctx context.Context, meta remotelog.SegmentMetadata, start, n int64, w io.Writer) (int64, error) {
	rc, err := d.st.FetchLogSegment(ctx, meta, start, start+n)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	written, err := io.Copy(w, io.LimitReader(rc, n))
	if err == nil && written < n {
		err = io.ErrUnexpectedEOF
	}
	return written, err
}

// Files are the files of one copy, each opened once: every byte checked
// is read through these handles, and every byte uploaded too, so a file
// the broker unlinks or replaces during the call changes nothing. (A
// file rewritten in place is seen through them: the endpoint uploads
// the indexes as the bytes it checked, and fails a copy whose uploaded
// .log is not the bytes it checked.)
type Files struct {
	Log, OffsetIndex, TimeIndex Source
	// TxnIndex and ProducerSnapshot have a nil R when absent.
	TxnIndex, ProducerSnapshot Source
	// LeaderEpochCheckpoint is the broker's LogSegmentData.leaderEpochIndex
	// bytes, stored verbatim as the copy's .leader-epoch-checkpoint.
	LeaderEpochCheckpoint []byte
	// LeaderEpochs are the segment's epochs (the manifest's leaderEpochs).
	LeaderEpochs []remotelog.EpochEntry
}

// Source is one file of a copy: its name (the broker's path, or the
// staged file's, for messages) and its bytes [0, Size) through R.
type Source struct {
	Name string
	R    io.ReaderAt // nil: absent
	Size int64
}

// present reports whether the file exists.
func (s Source) present() bool { return s.R != nil }
