package rsmapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/index"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/memory"
)

// memCatalogue is an in-memory Catalogue with Kafka's transition rules,
// for fast unit tests.
type memCatalogue struct {
	mu   sync.Mutex
	rows map[remotelog.SegmentID]remotelog.SegmentMetadata
	down error // not nil: every call fails with it
}

func newMemCatalogue() *memCatalogue {
	return &memCatalogue{rows: map[remotelog.SegmentID]remotelog.SegmentMetadata{}}
}

func (c *memCatalogue) setDown(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = err
}

func (c *memCatalogue) PutBrokerCopy(meta remotelog.SegmentMetadata) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down != nil {
		return c.down
	}
	c.rows[meta.ID] = meta
	return nil
}

func (c *memCatalogue) SetBrokerCopyState(tp remotelog.TopicPartition, start int64, id remotelog.SegmentID, to remotelog.SegmentState) (remotelog.SegmentMetadata, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down != nil {
		return remotelog.SegmentMetadata{}, c.down
	}
	r, ok := c.rows[id]
	if !ok || r.TopicPartition != tp || r.StartOffset != start {
		return r, fmt.Errorf("%w: %s %s", rlmm.ErrSegmentNotFound, tp, id)
	}
	if err := remotelog.CheckTransition(r.State, to); err != nil {
		return r, err
	}
	r.State, r.EventTimestampMs = to, time.Now().UnixMilli()
	c.rows[id] = r
	return r, nil
}

func (c *memCatalogue) BrokerCopy(tp remotelog.TopicPartition, start int64, id remotelog.SegmentID) (remotelog.SegmentMetadata, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down != nil {
		return remotelog.SegmentMetadata{}, c.down
	}
	r, ok := c.rows[id]
	if !ok || r.TopicPartition != tp || r.StartOffset != start {
		return r, fmt.Errorf("%w: %s %s", rlmm.ErrSegmentNotFound, tp, id)
	}
	return r, nil
}

func (c *memCatalogue) BrokerCopies(tp remotelog.TopicPartition) ([]remotelog.SegmentMetadata, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down != nil {
		return nil, c.down
	}
	var out []remotelog.SegmentMetadata
	for _, r := range c.rows {
		if r.TopicPartition == tp {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].StartOffset < out[j].StartOffset })
	return out, nil
}

func (c *memCatalogue) BrokerPartitions() ([]remotelog.TopicPartition, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down != nil {
		return nil, c.down
	}
	seen := map[remotelog.TopicPartition]bool{}
	var out []remotelog.TopicPartition
	for _, r := range c.rows {
		if !seen[r.TopicPartition] {
			seen[r.TopicPartition] = true
			out = append(out, r.TopicPartition)
		}
	}
	return out, nil
}

func (c *memCatalogue) ForgetBrokerCopy(tp remotelog.TopicPartition, start int64, id remotelog.SegmentID) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.rows, id)
	return nil
}

func (c *memCatalogue) PurgeBrokerCopies(tp remotelog.TopicPartition, beforeMs int64) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for id, r := range c.rows {
		if r.TopicPartition == tp && r.State == remotelog.DeleteSegmentFinished && r.EventTimestampMs < beforeMs {
			delete(c.rows, id)
			n++
		}
	}
	return n, nil
}

func (c *memCatalogue) row(id remotelog.SegmentID) (remotelog.SegmentMetadata, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.rows[id]
	return r, ok
}

// memStorage is a Storage over rsm.Manager on an in-memory bucket, whose
// Copy writes the objects and the manifest itself (reading every file
// through Files' handles), for fast unit tests. hook, when set, runs
// before each object's upload; an error from it fails the copy.
type memStorage struct {
	*rsm.Manager
	b    *memory.Bucket
	mu   sync.Mutex
	hook func(ctx context.Context, key string) error
	// copies counts Copy calls; maxPerID the most Copy calls of one id
	// running at once.
	copies   int
	running  map[remotelog.SegmentID]int
	maxPerID int
}

func newMemStorage(prefix string) *memStorage {
	b := memory.New()
	m, err := rsm.NewManager(b, rsm.Config{Prefix: prefix})
	if err != nil {
		panic(err)
	}
	return &memStorage{Manager: m, b: b, running: map[remotelog.SegmentID]int{}}
}

func (s *memStorage) setHook(h func(ctx context.Context, key string) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hook = h
}

func (s *memStorage) keys() []string {
	var out []string
	s.b.Iter(context.Background(), "", func(k string) error { out = append(out, k); return nil })
	return out
}

func (s *memStorage) Copy(ctx context.Context, meta remotelog.SegmentMetadata, files *Files) (_ *rsm.Manifest, err error) {
	s.mu.Lock()
	s.copies++
	s.running[meta.ID]++
	s.maxPerID = max(s.maxPerID, s.running[meta.ID])
	hook := s.hook
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.running[meta.ID]--
		s.mu.Unlock()
	}()
	mf := &rsm.Manifest{FormatVersion: rsm.ManifestFormatVersion, Topic: meta.TopicPartition.Topic, TopicID: meta.TopicID,
		Partition: meta.TopicPartition.Partition, SegmentID: meta.ID, StartOffset: meta.StartOffset, EndOffset: meta.EndOffset,
		MaxTimestampMs: meta.MaxTimestampMs, SizeInBytes: meta.SizeInBytes, LocalSizeInBytes: meta.LocalSizeInBytes,
		LeaderEpochs: files.LeaderEpochs, TxnIndexPresent: files.TxnIndex.present(), ProducerSnapshotPresent: files.ProducerSnapshot.present(),
		CreatedMs: 1, BrokerID: meta.BrokerID, Objects: map[string]rsm.ObjectInfo{}}
	defer func() { // best effort, as rsm's: through the hook, which may refuse
		if err != nil {
			for _, o := range mf.Objects {
				if hook == nil || hook(context.Background(), "delete "+o.Key) == nil {
					s.b.Delete(context.Background(), o.Key)
				}
			}
		}
	}()
	put := func(suffix string, data []byte) error {
		key := s.Key(meta, suffix)
		mf.Objects[suffix] = rsm.ObjectInfo{Key: key, Size: int64(len(data)), CRC32C: fmt.Sprintf("%08x", crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)))}
		if hook != nil {
			if err := hook(ctx, key); err != nil {
				return err
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		return s.b.Upload(ctx, key, bytes.NewReader(data), int64(len(data)))
	}
	read := func(src Source, n int64) ([]byte, error) {
		buf := make([]byte, n)
		if _, err := src.R.ReadAt(buf, 0); err != nil && !(errors.Is(err, io.EOF) && n == 0) {
			return nil, err
		}
		return buf, nil
	}
	log, err := read(files.Log, meta.SizeInBytes)
	if err != nil {
		return nil, err
	}
	if err := put(kafkalog.LogSuffix, log); err != nil {
		return nil, err
	}
	for _, o := range []struct {
		suffix string
		src    Source
		real   func([]byte) ([]byte, error)
	}{
		{kafkalog.IndexSuffix, files.OffsetIndex, func(b []byte) ([]byte, error) {
			e, err := index.ParseOffsetIndex(b, meta.StartOffset)
			return b[:len(e)*index.OffsetEntrySize], err
		}},
		{kafkalog.TimeIndexSuffix, files.TimeIndex, func(b []byte) ([]byte, error) {
			e, err := index.ParseTimeIndex(b, meta.StartOffset)
			return b[:len(e)*index.TimeEntrySize], err
		}},
		{kafkalog.TxnIndexSuffix, files.TxnIndex, nil},
		{kafkalog.SnapshotSuffix, files.ProducerSnapshot, nil},
	} {
		if !o.src.present() {
			continue
		}
		data, err := read(o.src, o.src.Size)
		if err != nil {
			return nil, err
		}
		if o.real != nil {
			if data, err = o.real(data); err != nil {
				return nil, err
			}
		}
		if err := put(o.suffix, data); err != nil {
			return nil, err
		}
	}
	if err := put(remotelog.LeaderEpochIndex.Suffix(), files.LeaderEpochCheckpoint); err != nil {
		return nil, err
	}
	body, err := json.Marshal(mf)
	if err != nil {
		return nil, err
	}
	if hook != nil {
		if err := hook(ctx, s.Key(meta, rsm.ManifestSuffix)); err != nil {
			return nil, err
		}
	}
	if err := s.b.Upload(ctx, s.Key(meta, rsm.ManifestSuffix), bytes.NewReader(body), int64(len(body))); err != nil {
		return nil, err
	}
	return mf, nil
}

func (s *memStorage) Delete(ctx context.Context, meta remotelog.SegmentMetadata) error {
	s.mu.Lock()
	hook := s.hook
	s.mu.Unlock()
	if hook != nil {
		if err := hook(ctx, "delete "+s.Key(meta, rsm.ManifestSuffix)); err != nil {
			return err
		}
	}
	return s.DeleteSegment(ctx, meta)
}

func (s *memStorage) AbortUploads(context.Context, remotelog.SegmentMetadata) (int, error) {
	return 0, nil
}

func (s *memStorage) Manifest(ctx context.Context, meta remotelog.SegmentMetadata) (*rsm.Manifest, error) {
	return s.ReadManifest(ctx, s.Key(meta, rsm.ManifestSuffix))
}
