package logview

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/checkpoint"
	"github.com/tierd/tierd/internal/kafkalog/epoch"
	"github.com/tierd/tierd/internal/kafkalog/index"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/listener"
	"github.com/tierd/tierd/locallog"
	"github.com/tierd/tierd/remoteread"
)

// Remote is the remote tier's Go read API (*remoteread.Engine).
type Remote interface {
	RemotePartitions(ctx context.Context) ([]remoteread.RemotePartition, error)
	RemoteOffsets(ctx context.Context, tp remotelog.TopicPartition) (remotelog.PartitionOffsets, bool, error)
	ReadRemote(ctx context.Context, tp remotelog.TopicPartition, offset int64, maxBytes int) (remoteread.RemoteRead, error)
	RemoteAbortedTxns(ctx context.Context, tp remotelog.TopicPartition, from, to int64) ([]index.AbortedTxn, error)
	RemoteOffsetForTimestamp(ctx context.Context, tp remotelog.TopicPartition, ts int64) (offset, timestamp int64, found bool, err error)
	RemoteMaxTimestamp(ctx context.Context, tp remotelog.TopicPartition) (offset, timestamp int64, found bool, err error)
	RemoteLeaderEpochs(ctx context.Context, tp remotelog.TopicPartition) ([]epoch.Entry, error)
}

// Option sets an optional collaborator.
type Option func(*View)

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(v *View) { v.log = l } }

// View is the joined log of every partition tierd serves. It implements
// listener.Log.
type View struct {
	cfg    Config
	remote Remote
	log    *slog.Logger

	mu       sync.Mutex
	local    map[kafkalog.TopicPartition]*locallog.Partition
	scanned  time.Time
	ckpts    map[string]*ckptFile // path -> a log dir's offset checkpoint
	topics   []listener.Topic
	topicsAt time.Time
	epochs   map[kafkalog.TopicPartition]cachedEpochs
	ids      map[kafkalog.TopicPartition]cachedTopicID
	warned   map[string]bool
}

type cachedEpochs struct {
	at      time.Time
	entries []listener.EpochEntry
}

var _ listener.Log = (*View)(nil)

// New returns a view; it lists the log dirs on first use.
func New(cfg Config, remote Remote, opts ...Option) (*View, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	v := &View{cfg: cfg, remote: remote, log: slog.New(slog.DiscardHandler), local: map[kafkalog.TopicPartition]*locallog.Partition{},
		ckpts: map[string]*ckptFile{}, epochs: map[kafkalog.TopicPartition]cachedEpochs{}, warned: map[string]bool{}}
	for _, o := range opts {
		o(v)
	}
	return v, nil
}

// ckptFile is one log dir's offset checkpoint (replication-offset-checkpoint
// or log-start-offset-checkpoint), re-read when the file was replaced (the broker writes a new file and renames it over the
// old one) or its modification time or size changed.
type ckptFile struct {
	mu   sync.Mutex
	path string
	last os.FileInfo
	hws  map[kafkalog.TopicPartition]int64
	err  error
}

func (h *ckptFile) get(tp kafkalog.TopicPartition) (int64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st, err := os.Stat(h.path)
	if err != nil {
		return 0, false // no checkpoint yet: nothing is known to be replicated
	}
	if h.last == nil || !os.SameFile(h.last, st) || !st.ModTime().Equal(h.last.ModTime()) || st.Size() != h.last.Size() {
		hws, err := checkpoint.ReadFile(h.path)
		if err != nil {
			// A checkpoint being replaced reads whole on the next try
			// (the broker writes it atomically); keep the last good one.
			h.err = err
			if h.hws == nil {
				return 0, false
			}
		} else {
			h.hws, h.last, h.err = hws, st, nil
		}
	}
	off, ok := h.hws[tp]
	return off, ok
}

// rescan lists the log dirs again when the last listing is older than
// RescanInterval, or at once with force. Callers hold v.mu.
func (v *View) rescanLocked(force bool) {
	if !force && time.Since(v.scanned) < v.cfg.RescanInterval {
		return
	}
	v.scanned = time.Now()
	found := map[kafkalog.TopicPartition][]string{}
	for _, dir := range v.cfg.LogDirs {
		ents, err := os.ReadDir(dir)
		if err != nil {
			v.warnOnce("readdir:"+dir, "log dir not readable; its partitions are not served", "dir", dir, "err", err)
			continue
		}
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			if tp, ok := kafkalog.ParsePartitionDir(e.Name()); ok {
				found[tp] = append(found[tp], filepath.Join(dir, e.Name()))
			}
		}
	}
	next := make(map[kafkalog.TopicPartition]*locallog.Partition, len(found))
	for tp, dirs := range found {
		dir := v.pickDir(tp, dirs)
		if p, ok := v.local[tp]; ok && p.Dir() == dir {
			next[tp] = p
			continue
		}
		opts := locallog.Options{}
		if v.cfg.BrokerOwned {
			h := v.checkpointFor(filepath.Dir(dir), kafkalog.ReplicationOffsetCheckpointFile)
			opts.HighWatermark = func() (int64, bool) { return h.get(tp) }
		}
		p, err := locallog.Open(dir, opts)
		if err != nil {
			v.warnOnce("open:"+dir, "partition directory not readable; not served", "dir", dir, "err", err)
			continue
		}
		next[tp] = p
	}
	for tp, p := range v.local {
		if next[tp] != p {
			p.Close() // reads already running finish first; later ones start over
		}
	}
	v.local = next
}

// pickDir chooses, for a partition live in several log dirs (a move
// between log dirs caught midway), the one whose log reaches further.
func (v *View) pickDir(tp kafkalog.TopicPartition, dirs []string) string {
	if len(dirs) == 1 {
		return dirs[0]
	}
	best, bestEnd := dirs[0], int64(-1)
	for _, d := range dirs {
		p, err := locallog.Open(d, locallog.Options{})
		if err != nil {
			continue
		}
		if o, err := p.Offsets(); err == nil && o.HighWatermark > bestEnd {
			best, bestEnd = d, o.HighWatermark
		}
		p.Close()
	}
	v.warnOnce("dup:"+tp.String(), "partition live in several log dirs; serving the one that reaches further", "partition", tp, "dirs", dirs, "serving", best)
	return best
}

// checkpointFor returns the offset checkpoint name of logDir. Callers
// hold v.mu.
func (v *View) checkpointFor(logDir, name string) *ckptFile {
	path := filepath.Join(logDir, name)
	h, ok := v.ckpts[path]
	if !ok {
		h = &ckptFile{path: path}
		v.ckpts[path] = h
	}
	return h
}

func (v *View) warnOnce(key, msg string, args ...any) {
	if v.warned[key] {
		return
	}
	v.warned[key] = true
	v.log.Warn(msg, args...)
}

// localPartition returns the partition's local log, or nil. With miss,
// a partition not found makes the log dirs be listed again (at most once
// per RescanInterval).
func (v *View) localPartition(tp kafkalog.TopicPartition) *locallog.Partition {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.rescanLocked(false)
	return v.local[tp]
}

// forceRescan lists the log dirs now: a segment vanished under a reader,
// so the partition may have moved.
func (v *View) forceRescan() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.rescanLocked(true)
}

// Topics implements listener.Log.
func (v *View) Topics(ctx context.Context) ([]listener.Topic, error) {
	v.mu.Lock()
	if v.topics != nil && time.Since(v.topicsAt) < v.cfg.CacheTTL {
		t := v.topics
		v.mu.Unlock()
		return t, nil
	}
	v.rescanLocked(false)
	local := make(map[kafkalog.TopicPartition]*locallog.Partition, len(v.local))
	for tp, p := range v.local {
		local[tp] = p
	}
	v.mu.Unlock()

	type topicInfo struct {
		parts             map[int32]bool
		localID, remoteID string
	}
	byName := map[string]*topicInfo{}
	info := func(name string) *topicInfo {
		t, ok := byName[name]
		if !ok {
			t = &topicInfo{parts: map[int32]bool{}}
			byName[name] = t
		}
		return t
	}
	for tp, p := range local {
		t := info(tp.Topic)
		t.parts[tp.Partition] = true
		if id, err := p.TopicID(); err == nil && id != "" {
			t.localID = id
		}
	}
	remote, err := v.remote.RemotePartitions(ctx)
	if err != nil {
		return nil, fmt.Errorf("logview: list remote partitions: %w", err)
	}
	for _, rp := range remote { // partitions with something tiered
		t := info(rp.TopicPartition.Topic)
		t.parts[rp.TopicPartition.Partition] = true
		if rp.TopicID != "" {
			t.remoteID = rp.TopicID
		}
	}
	out := make([]listener.Topic, 0, len(byName))
	for name, t := range byName {
		lt := listener.Topic{Name: name, Internal: internalTopic(name), ID: derivedTopicID(name)}
		for _, s := range []string{t.localID, t.remoteID} {
			if s == "" {
				continue
			}
			if id, err := kafkalog.ParseTopicID(s); err == nil {
				lt.ID = id
				break
			}
		}
		for p := range t.parts {
			lt.Partitions = append(lt.Partitions, p)
		}
		sort.Slice(lt.Partitions, func(i, j int) bool { return lt.Partitions[i] < lt.Partitions[j] })
		out = append(out, lt)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	v.mu.Lock()
	v.uniqueIDsLocked(out)
	v.topics, v.topicsAt = out, time.Now()
	v.mu.Unlock()
	return out, nil
}

// uniqueIDsLocked gives every topic whose recorded id another topic also
// claims (a partition directory copied under another name, with its
// partition.metadata) the id derived from its name instead, and warns
// once: clients fetch by id (Fetch v13+), and an id naming two topics
// would read one topic's records for the other. Callers hold v.mu.
func (v *View) uniqueIDsLocked(topics []listener.Topic) {
	claims := make(map[[16]byte]int, len(topics))
	for _, t := range topics {
		claims[t.ID]++
	}
	for i, t := range topics {
		if claims[t.ID] < 2 {
			continue
		}
		v.warnOnce("shared-id:"+t.Name, "topic id claimed by several topics; serving this topic under the id derived from its name",
			"topic", t.Name, "claimed_id", base64.RawURLEncoding.EncodeToString(t.ID[:]))
		topics[i].ID = derivedTopicID(t.Name)
	}
}

// internalTopic says whether Kafka marks the topic internal, or it is
// the KRaft metadata log.
func internalTopic(name string) bool {
	return name == "__consumer_offsets" || name == "__transaction_state" || name == "__cluster_metadata" ||
		strings.HasPrefix(name, "__share_group_state")
}

// derivedTopicID is the id of a topic that has none recorded (see the
// package doc): SHA-256 of a fixed prefix and the name, as a version-4
// Uuid.
func derivedTopicID(name string) [16]byte {
	sum := sha256.Sum256([]byte("tierd-topic-id:" + name))
	var id [16]byte
	copy(id[:], sum[:16])
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
	return id
}

// errNoData marks offsets that neither tier holds.
var errNoData = errors.New("offsets held by neither tier")
