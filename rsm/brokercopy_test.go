package rsm_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/epoch"
	"github.com/tierd/tierd/internal/kafkalog/index"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/memory"
)

// heldFile is a File over a handle opened before the copy: a new reader
// from byte 0 of it, whose Stat is the handle's.
type heldFile struct {
	*io.SectionReader
	f      *os.File
	closed *sync.Map // path -> true once closed
	path   string
}

func (h heldFile) Stat() (fs.FileInfo, error) { return h.f.Stat() }
func (h heldFile) Close() error               { h.closed.Store(h.path, true); return nil }

// heldFiles opens every path once, as the RSM endpoint opens the broker's
// files, and returns an Open that hands out readers over those handles,
// and the count of its calls per path.
type heldFiles struct {
	mu      sync.Mutex
	handles map[string]*os.File
	opened  map[string]int
	closed  sync.Map
	fail    string // a path whose Open fails
}

func holdFiles(t *testing.T, paths ...string) *heldFiles {
	h := &heldFiles{handles: map[string]*os.File{}, opened: map[string]int{}}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		h.handles[p] = f
	}
	return h
}

var errOpen = errors.New("injected open failure")

func (h *heldFiles) open(p string) (rsm.File, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.opened[p]++
	if p == h.fail {
		return nil, errOpen
	}
	f, ok := h.handles[p]
	if !ok {
		return nil, fs.ErrNotExist
	}
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return heldFile{SectionReader: io.NewSectionReader(f, 0, st.Size()), f: f, closed: &h.closed, path: p}, nil
}

// brokerFiles writes a segment as a broker leaves it when it rolls: a
// .log, an offset and a time index with real entries followed by the
// zero padding of a preallocated file, a .txnindex and a producer
// snapshot; and returns the files and their bytes by path.
func brokerFiles(t *testing.T) (rsm.SegmentFiles, map[string][]byte) {
	dir := t.TempDir()
	name := func(suffix string) string { return filepath.Join(dir, kafkalog.FileName(100, suffix)) }
	offs, _ := index.AppendOffsetEntry(nil, 100, index.OffsetEntry{Offset: 150, Position: 4096})
	times, _ := index.AppendTimeEntry(nil, 100, index.TimeEntry{Timestamp: 1_700_000_000_150, Offset: 150})
	data := map[string][]byte{
		name(kafkalog.LogSuffix):                                            bytes.Repeat([]byte("batches!"), 1024),
		name(kafkalog.IndexSuffix):                                          append(offs, make([]byte, 80)...),
		name(kafkalog.TimeIndexSuffix):                                      append(times, make([]byte, 120)...),
		name(kafkalog.TxnIndexSuffix):                                       bytes.Repeat([]byte{7}, 40),
		filepath.Join(dir, kafkalog.FileName(200, kafkalog.SnapshotSuffix)): bytes.Repeat([]byte{9}, 33),
	}
	for p, d := range data {
		if err := os.WriteFile(p, d, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return rsm.SegmentFiles{Log: name(kafkalog.LogSuffix), OffsetIndex: name(kafkalog.IndexSuffix), TimeIndex: name(kafkalog.TimeIndexSuffix),
		TxnIndex: name(kafkalog.TxnIndexSuffix), ProducerSnapshot: filepath.Join(dir, kafkalog.FileName(200, kafkalog.SnapshotSuffix)),
		LeaderEpochs: []remotelog.EpochEntry{{Epoch: 5, StartOffset: 120}}}, data
}

func brokerMeta() remotelog.SegmentMetadata {
	return remotelog.SegmentMetadata{TopicPartition: remotelog.TopicPartition{Topic: "orders", Partition: 2}, TopicID: "B3_HiNPgSQ6oxG9ZZ6ED5A",
		ID: remotelog.NewSegmentID(), StartOffset: 100, EndOffset: 199, SizeInBytes: 8192, State: remotelog.CopySegmentStarted,
		SegmentLeaderEpochs: []remotelog.EpochEntry{{Epoch: 5, StartOffset: 120}}, TxnIndexPresent: true, ProducerSnapshotPresent: true}
}

// TestCopySegmentThroughOpen: with SegmentFiles.Open set, every file is
// read through it, once, and closed, never through its path: the files
// are unlinked before the copy (as a broker's retention may during it)
// and the copy still stores their bytes (indexes cut to their real
// entries).
func TestCopySegmentThroughOpen(t *testing.T) {
	ctx := context.Background()
	m, err := rsm.NewManager(memory.New(), rsm.Config{Prefix: "_kafka-rsm"})
	if err != nil {
		t.Fatal(err)
	}
	files, data := brokerFiles(t)
	paths := []string{files.Log, files.OffsetIndex, files.TimeIndex, files.TxnIndex, files.ProducerSnapshot}
	h := holdFiles(t, paths...)
	for _, p := range paths {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	files.Open = h.open
	meta := brokerMeta()
	mf, err := m.CopySegment(ctx, meta, files)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{
		kafkalog.LogSuffix:       data[files.Log],
		kafkalog.IndexSuffix:     data[files.OffsetIndex][:index.OffsetEntrySize],
		kafkalog.TimeIndexSuffix: data[files.TimeIndex][:index.TimeEntrySize],
		kafkalog.TxnIndexSuffix:  data[files.TxnIndex],
		kafkalog.SnapshotSuffix:  data[files.ProducerSnapshot],
	}
	for suffix, w := range want {
		if got := stored(t, m, m.Key(meta, suffix)); !bytes.Equal(got, w) {
			t.Errorf("%s object: %d bytes, want the file's %d", suffix, len(got), len(w))
		}
		if mf.Objects[suffix].Size != int64(len(w)) {
			t.Errorf("manifest's %s: %+v", suffix, mf.Objects[suffix])
		}
	}
	for _, p := range paths {
		if h.opened[p] != 1 {
			t.Errorf("%s opened %d times, want once", filepath.Base(p), h.opened[p])
		}
		if _, ok := h.closed.Load(p); !ok {
			t.Errorf("%s not closed", filepath.Base(p))
		}
	}
	if err := m.VerifyCopy(ctx, mf.Metadata()); err != nil {
		t.Fatal(err)
	}
}

// TestCopySegmentOpenFailure: an Open that fails fails the copy, and
// none of its objects stays.
func TestCopySegmentOpenFailure(t *testing.T) {
	for _, which := range []string{"log", "index", "txnindex"} {
		t.Run(which, func(t *testing.T) {
			b := memory.New()
			m, _ := rsm.NewManager(b, rsm.Config{Prefix: "_kafka-rsm"})
			files, _ := brokerFiles(t)
			h := holdFiles(t, files.Log, files.OffsetIndex, files.TimeIndex, files.TxnIndex, files.ProducerSnapshot)
			h.fail = map[string]string{"log": files.Log, "index": files.OffsetIndex, "txnindex": files.TxnIndex}[which]
			files.Open = h.open
			if _, err := m.CopySegment(context.Background(), brokerMeta(), files); !errors.Is(err, errOpen) {
				t.Fatalf("copy = %v, want the open failure", err)
			}
			var left []string
			b.Iter(context.Background(), "", func(k string) error { left = append(left, k); return nil })
			if len(left) != 0 {
				t.Fatalf("objects left: %v", left)
			}
		})
	}
}

// TestLeaderEpochCheckpointBytes: the .leader-epoch-checkpoint object is
// SegmentFiles.LeaderEpochCheckpoint byte for byte (the partition's whole
// history, as the broker gives it), read back as it was given, while the
// manifest's leaderEpochs are the segment's; without it the object is
// the checkpoint text of LeaderEpochs.
func TestLeaderEpochCheckpointBytes(t *testing.T) {
	ctx := context.Background()
	history := []byte("0\n3\n0 0\n2 50\n5 120\n")
	for _, tc := range []struct {
		name       string
		checkpoint []byte
		want       []byte
	}{
		{"the broker's bytes", history, history},
		{"no bytes given", nil, epoch.Encode([]remotelog.EpochEntry{{Epoch: 5, StartOffset: 120}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := rsm.NewManager(memory.New(), rsm.Config{Prefix: "_kafka-rsm"})
			files, _ := brokerFiles(t)
			files.LeaderEpochCheckpoint = tc.checkpoint
			meta := brokerMeta()
			mf, err := m.CopySegment(ctx, meta, files)
			if err != nil {
				t.Fatal(err)
			}
			got, err := m.FetchIndex(ctx, meta, remotelog.LeaderEpochIndex)
			if err != nil || !bytes.Equal(got, tc.want) {
				t.Errorf("LEADER_EPOCH = %q, %v; want %q", got, err, tc.want)
			}
			back, err := m.ReadManifest(ctx, m.Key(meta, rsm.ManifestSuffix))
			if err != nil {
				t.Fatal(err)
			}
			if len(back.LeaderEpochs) != 1 || back.LeaderEpochs[0] != (remotelog.EpochEntry{Epoch: 5, StartOffset: 120}) {
				t.Errorf("manifest's leaderEpochs %v, want the segment's", back.LeaderEpochs)
			}
			if err := m.VerifyCopy(ctx, mf.Metadata()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestBrokerOwnedManifest: SegmentFiles.BrokerOwned writes
// "brokerOwned": true in the manifest, read back as BrokerOwned; other
// copies' manifests have no such key.
func TestBrokerOwnedManifest(t *testing.T) {
	ctx := context.Background()
	for _, owned := range []bool{true, false} {
		m, _ := rsm.NewManager(memory.New(), rsm.Config{Prefix: "_kafka-rsm"})
		files, _ := brokerFiles(t)
		files.BrokerOwned = owned
		meta := brokerMeta()
		if _, err := m.CopySegment(ctx, meta, files); err != nil {
			t.Fatal(err)
		}
		raw := rawManifest(t, m, meta)
		if v, ok := raw["brokerOwned"]; owned != ok || (ok && v != true) {
			t.Errorf("BrokerOwned %v: manifest's brokerOwned %v (present %v)", owned, v, ok)
		}
		back, err := m.ReadManifest(ctx, m.Key(meta, rsm.ManifestSuffix))
		if err != nil || back.BrokerOwned != owned {
			t.Errorf("BrokerOwned %v: read back %v, %v", owned, back.BrokerOwned, err)
		}
	}
}
