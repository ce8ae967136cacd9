package copier

import (
	"sync"

	"github.com/tierd/tierd/internal/remotelog"
)

// generationer is implemented by a metadata store that numbers its
// writes (rlmm.Store.Generation): the number changes after every write,
// of any partition, and after the store reopens its database.
type generationer interface {
	Generation() uint64
}

// cachedStore keeps the results of the per-partition reads a pass makes
// (offsets, rows, finished rows, scheduled deletions) for as long as the
// store's generation is unchanged, so that a pass over partitions where
// nothing changed reads nothing from the store: an idle pass costs no
// Pebble reads, and a busy one reads each partition afresh. An entry is
// filled with the generation read before the store was read, so a write
// racing the read leaves it stale, never wrong. Writes go to the store
// unchanged (they change the generation). Results are copies: callers
// may change them.
type cachedStore struct {
	MetadataStore
	gen generationer

	mu   sync.Mutex
	at   uint64 // the generation the entries are of
	offs map[remotelog.TopicPartition]cachedOffsets
	rows map[remotelog.TopicPartition][]remotelog.SegmentMetadata
	fin  map[remotelog.TopicPartition][]remotelog.SegmentMetadata
	dels map[remotelog.TopicPartition][]remotelog.PartitionDeletion
}

type cachedOffsets struct {
	off remotelog.PartitionOffsets
	ok  bool
}

// withReadCache wraps store in a cachedStore when it numbers its writes.
func withReadCache(store MetadataStore) MetadataStore {
	g, ok := store.(generationer)
	if !ok {
		return store
	}
	return &cachedStore{MetadataStore: store, gen: g}
}

// valid returns the current generation, dropping the entries when they
// are of another one.
func (s *cachedStore) valid() uint64 {
	g := s.gen.Generation()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at != g || s.offs == nil {
		s.at = g
		s.offs = map[remotelog.TopicPartition]cachedOffsets{}
		s.rows = map[remotelog.TopicPartition][]remotelog.SegmentMetadata{}
		s.fin = map[remotelog.TopicPartition][]remotelog.SegmentMetadata{}
		s.dels = map[remotelog.TopicPartition][]remotelog.PartitionDeletion{}
	}
	return g
}

// keep stores an entry read at generation g, unless the cache moved on.
func (s *cachedStore) keep(g uint64, put func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at == g {
		put()
	}
}

// Offsets is MetadataStore.Offsets, cached.
func (s *cachedStore) Offsets(tp remotelog.TopicPartition) (remotelog.PartitionOffsets, bool, error) {
	g := s.valid()
	s.mu.Lock()
	e, hit := s.offs[tp]
	s.mu.Unlock()
	if hit {
		return e.off, e.ok, nil
	}
	off, ok, err := s.MetadataStore.Offsets(tp)
	if err == nil {
		s.keep(g, func() { s.offs[tp] = cachedOffsets{off, ok} })
	}
	return off, ok, err
}

// Segments is MetadataStore.Segments, cached.
func (s *cachedStore) Segments(tp remotelog.TopicPartition) ([]remotelog.SegmentMetadata, error) {
	return s.cachedRows(tp, false, s.MetadataStore.Segments)
}

// FinishedSegments is MetadataStore.FinishedSegments, cached.
func (s *cachedStore) FinishedSegments(tp remotelog.TopicPartition) ([]remotelog.SegmentMetadata, error) {
	return s.cachedRows(tp, true, s.MetadataStore.FinishedSegments)
}

// rowMap returns the current map of all rows or of finished rows.
// Callers hold mu.
func (s *cachedStore) rowMap(finished bool) map[remotelog.TopicPartition][]remotelog.SegmentMetadata {
	if finished {
		return s.fin
	}
	return s.rows
}

func (s *cachedStore) cachedRows(tp remotelog.TopicPartition, finished bool,
	read func(remotelog.TopicPartition) ([]remotelog.SegmentMetadata, error)) ([]remotelog.SegmentMetadata, error) {
	g := s.valid()
	s.mu.Lock()
	rows, hit := s.rowMap(finished)[tp]
	all, allHit := s.rows[tp]
	s.mu.Unlock()
	if hit {
		return append([]remotelog.SegmentMetadata(nil), rows...), nil
	}
	if finished && allHit {
		// The finished rows are the partition's rows in
		// COPY_SEGMENT_FINISHED, superseded copies left out: the store
		// keeps them as a mirror of those rows, written in the same
		// batch (rlmm.Store.FinishedSegments). Taking them from the
		// rows of this generation, which the pass's sweep read, saves
		// decoding them a second time.
		fin := finishedOf(all)
		s.keep(g, func() { s.fin[tp] = append([]remotelog.SegmentMetadata(nil), fin...) })
		return fin, nil
	}
	rows, err := read(tp)
	if err == nil {
		kept := append([]remotelog.SegmentMetadata(nil), rows...)
		s.keep(g, func() { s.rowMap(finished)[tp] = kept })
	}
	return rows, err
}

// finishedOf returns the rows in COPY_SEGMENT_FINISHED of rows (one
// partition's, ordered by start offset, as the store lists them), with
// superseded copies left out as the store's FinishedSegments does.
func finishedOf(rows []remotelog.SegmentMetadata) []remotelog.SegmentMetadata {
	var fin []remotelog.SegmentMetadata
	for _, r := range rows {
		if r.State == remotelog.CopySegmentFinished {
			fin = append(fin, r)
		}
	}
	return remotelog.Supersede(fin)
}

// Deletions is MetadataStore.Deletions, cached for one partition.
func (s *cachedStore) Deletions(tp *remotelog.TopicPartition) ([]remotelog.PartitionDeletion, error) {
	if tp == nil {
		return s.MetadataStore.Deletions(nil)
	}
	g := s.valid()
	s.mu.Lock()
	ds, hit := s.dels[*tp]
	s.mu.Unlock()
	if hit {
		return append([]remotelog.PartitionDeletion(nil), ds...), nil
	}
	ds, err := s.MetadataStore.Deletions(tp)
	if err == nil {
		kept := append([]remotelog.PartitionDeletion(nil), ds...)
		key := *tp
		s.keep(g, func() { s.dels[key] = kept })
	}
	return ds, err
}
