package rsmapi

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"path"
	"time"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
)

// BrokerPrefix is the key prefix of the broker-owned copies:
// <bucket.prefix>/<rsm.prefix>, or rsm.prefix alone without a bucket
// prefix.
func BrokerPrefix(bucketPrefix, rsmPrefix string) string {
	return path.Join(bucketPrefix, rsmPrefix)
}

// NewStorage returns the Storage of broker-owned copies over m, a Manager
// whose prefix is BrokerPrefix (so that the copies' keys are those the
// package doc lays out).
func NewStorage(m *rsm.Manager) Storage { return managerStorage{m: m} }

type managerStorage struct{ m *rsm.Manager }

// Copy is rsm.Manager.CopySegment with every file read through files'
// handles (SegmentFiles.Open: a new reader over the handle each time),
// the broker's epoch checkpoint stored as given, and the manifest marked
// broker-owned.
func (s managerStorage) Copy(ctx context.Context, meta remotelog.SegmentMetadata, files *Files) (*rsm.Manifest, error) {
	byName := map[string]Source{}
	name := func(src Source, kind string) string {
		if !src.present() {
			return ""
		}
		n := kind + ": " + src.Name
		byName[n] = src
		return n
	}
	cp := files.LeaderEpochCheckpoint
	if cp == nil {
		cp = []byte{}
	}
	sf := rsm.SegmentFiles{
		Log: name(files.Log, "log"), OffsetIndex: name(files.OffsetIndex, "offset index"), TimeIndex: name(files.TimeIndex, "time index"),
		TxnIndex: name(files.TxnIndex, "transaction index"), ProducerSnapshot: name(files.ProducerSnapshot, "producer snapshot"),
		LeaderEpochs: files.LeaderEpochs, LeaderEpochCheckpoint: cp, BrokerOwned: true,
		Open: func(p string) (rsm.File, error) {
			src, ok := byName[p]
			if !ok {
				return nil, fmt.Errorf("rsmapi: the copy has no file %q", p)
			}
			return sectionFile{SectionReader: io.NewSectionReader(src.R, 0, src.Size), name: p}, nil
		},
	}
	return s.m.CopySegment(ctx, meta, sf)
}

func (s managerStorage) VerifyPresent(ctx context.Context, mf *rsm.Manifest) error {
	return s.m.VerifyPresent(ctx, mf)
}

func (s managerStorage) Delete(ctx context.Context, meta remotelog.SegmentMetadata) error {
	return s.m.DeleteSegment(ctx, meta)
}

func (s managerStorage) AbortUploads(ctx context.Context, meta remotelog.SegmentMetadata) (int, error) {
	return s.m.AbortUploadsOf(ctx, meta)
}

func (s managerStorage) Manifest(ctx context.Context, meta remotelog.SegmentMetadata) (*rsm.Manifest, error) {
	return s.m.ReadManifest(ctx, s.m.Key(meta, rsm.ManifestSuffix))
}

func (s managerStorage) FetchIndex(ctx context.Context, meta remotelog.SegmentMetadata, t remotelog.IndexType) ([]byte, error) {
	return s.m.FetchIndex(ctx, meta, t)
}

func (s managerStorage) FetchLogSegment(ctx context.Context, meta remotelog.SegmentMetadata, start, end int64) (io.ReadCloser, error) {
	return s.m.FetchLogSegment(ctx, meta, start, end)
}

func (s managerStorage) Partitions(ctx context.Context) ([]remotelog.TopicPartition, error) {
	return s.m.Partitions(ctx)
}

func (s managerStorage) Manifests(ctx context.Context, tp remotelog.TopicPartition) ([]*rsm.Manifest, error) {
	return s.m.Manifests(ctx, tp)
}

func (s managerStorage) Key(meta remotelog.SegmentMetadata, suffix string) string {
	return s.m.Key(meta, suffix)
}

// sectionFile is one reader over a handle the endpoint holds: closing it
// leaves the handle open (the endpoint closes it when the copy ends).
type sectionFile struct {
	*io.SectionReader
	name string
}

func (f sectionFile) Close() error { return nil }

func (f sectionFile) Stat() (fs.FileInfo, error) { return fileInfo{name: f.name, size: f.Size()}, nil }

// fileInfo describes a sectionFile.
type fileInfo struct {
	name string
	size int64
}

func (i fileInfo) Name() string       { return i.name }
func (i fileInfo) Size() int64        { return i.size }
func (i fileInfo) Mode() fs.FileMode  { return 0o400 }
func (i fileInfo) ModTime() time.Time { return time.Time{} }
func (i fileInfo) IsDir() bool        { return false }
func (i fileInfo) Sys() any           { return nil }
