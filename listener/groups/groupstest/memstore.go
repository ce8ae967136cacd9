// Package groupstest holds a memory groups.Store for tests (fast unit
// tests only: tierd keeps groups in rlmm's Pebble store).
package groupstest

import (
	"maps"
	"sort"
	"sync"

	"github.com/tierd/tierd/internal/remotelog"
)

// MemStore is a groups.Store in memory. Fail, when set, is returned by
// every write (a store that takes no writes).
type MemStore struct {
	mu      sync.Mutex
	records map[string][]byte
	offsets map[string]map[remotelog.TopicPartition][]byte
	Fail    error
	Writes  int
}

// NewMemStore returns an empty store.
func NewMemStore() *MemStore {
	return &MemStore{records: map[string][]byte{}, offsets: map[string]map[remotelog.TopicPartition][]byte{}}
}

// WriteGroup implements groups.Store.
func (s *MemStore) WriteGroup(group string, record []byte, offsets map[remotelog.TopicPartition][]byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Fail != nil {
		return s.Fail
	}
	s.Writes++
	if record != nil {
		s.records[group] = append([]byte(nil), record...)
	}
	if len(offsets) > 0 && s.offsets[group] == nil {
		s.offsets[group] = map[remotelog.TopicPartition][]byte{}
	}
	for tp, v := range offsets {
		s.offsets[group][tp] = append([]byte(nil), v...)
	}
	return nil
}

// DeleteGroup implements groups.Store.
func (s *MemStore) DeleteGroup(group string, partitions []remotelog.TopicPartition) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Fail != nil {
		return s.Fail
	}
	s.Writes++
	if partitions == nil {
		delete(s.records, group)
		delete(s.offsets, group)
		return nil
	}
	for _, tp := range partitions {
		delete(s.offsets[group], tp)
	}
	return nil
}

// LoadGroups implements groups.Store, in group order.
func (s *MemStore) LoadGroups(fn func(group string, record []byte, offsets map[remotelog.TopicPartition][]byte) error) error {
	s.mu.Lock()
	names := map[string]bool{}
	for g := range s.records {
		names[g] = true
	}
	for g := range s.offsets {
		names[g] = true
	}
	sorted := make([]string, 0, len(names))
	for g := range names {
		sorted = append(sorted, g)
	}
	sort.Strings(sorted)
	type entry struct {
		rec  []byte
		offs map[remotelog.TopicPartition][]byte
	}
	entries := make([]entry, len(sorted))
	for i, g := range sorted {
		entries[i] = entry{s.records[g], maps.Clone(s.offsets[g])}
	}
	s.mu.Unlock()
	for i, g := range sorted {
		offs := entries[i].offs
		if offs == nil {
			offs = map[remotelog.TopicPartition][]byte{}
		}
		if err := fn(g, entries[i].rec, offs); err != nil {
			return err
		}
	}
	return nil
}

// Groups returns the groups kept.
func (s *MemStore) Groups() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for g := range s.records {
		out = append(out, g)
	}
	for g := range s.offsets {
		if _, ok := s.records[g]; !ok {
			out = append(out, g)
		}
	}
	sort.Strings(out)
	return out
}
