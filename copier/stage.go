package copier

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/index"
	"github.com/tierd/tierd/internal/remotelog"
)

// StagingDir is the private folder, inside each partition directory, where
// a segment's files are hard-linked for the length of one copy, so that a
// broker (or tierd's own retention) deleting the segment mid-copy cannot
// break the upload. Kafka loads only regular files from a partition
// directory, so it ignores this folder.
const StagingDir = ".tierd-staging"

// errVanished is returned when a segment's .log disappeared before staging.
var errVanished = errors.New("copier: segment vanished before it was copied")

// staged is a segment's files as linked into a staging folder.
type staged struct {
	dir                      string
	log, offsetIdx, timeIdx  string
	txnIdx, producerSnapshot string // "" when absent
}

// stage hard-links the segment's files into a new staging folder (copying
// when the filesystem cannot link). The .log is required; indexes,
// .txnindex and the producer snapshot at end+1 are optional.
func stage(p *partition, s localSegment, id remotelog.SegmentID) (*staged, error) {
	dir := filepath.Join(p.dir, StagingDir, fmt.Sprintf("%020d-%s", s.base, id))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	st := &staged{dir: dir}
	link := func(src string, required bool) (string, error) {
		dst := filepath.Join(dir, filepath.Base(src))
		err := os.Link(src, dst)
		if errors.Is(err, os.ErrNotExist) {
			if required {
				return "", fmt.Errorf("%w: %s", errVanished, src)
			}
			return "", nil
		}
		if err != nil {
			err = copyFile(src, dst) // e.g. a filesystem without hard links
		}
		return dst, err
	}
	var err error
	if st.log, err = link(s.path, true); err != nil {
		return st, err
	}
	if st.offsetIdx, err = link(s.file(kafkalog.IndexSuffix), false); err != nil {
		return st, err
	}
	if st.timeIdx, err = link(s.file(kafkalog.TimeIndexSuffix), false); err != nil {
		return st, err
	}
	if st.txnIdx, err = link(s.file(kafkalog.TxnIndexSuffix), false); err != nil {
		return st, err
	}
	st.producerSnapshot, err = link(filepath.Join(p.dir, kafkalog.FileName(s.end+1, kafkalog.SnapshotSuffix)), false)
	return st, err
}

// replaceIndexes writes rebuilt indexes into the staging folder, unlinking
// the links first so the local files are never touched.
func (st *staged) replaceIndexes(base int64, b *index.Builder) error {
	offs, times, err := b.Encode(base)
	if err != nil {
		return err
	}
	st.offsetIdx = filepath.Join(st.dir, kafkalog.FileName(base, kafkalog.IndexSuffix))
	st.timeIdx = filepath.Join(st.dir, kafkalog.FileName(base, kafkalog.TimeIndexSuffix))
	for _, f := range []struct {
		path string
		data []byte
	}{{st.offsetIdx, offs}, {st.timeIdx, times}} {
		if err := os.Remove(f.path); err != nil && !os.IsNotExist(err) {
			return err
		}
		if err := os.WriteFile(f.path, f.data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// cleanStaging removes a partition's staging folder: at the start of a
// pass no copy is in flight, so anything there was left by a crash.
func cleanStaging(partitionDir string) error {
	return os.RemoveAll(filepath.Join(partitionDir, StagingDir))
}
