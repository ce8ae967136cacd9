package rlmm

import (
	"encoding/json"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tierd/tierd/internal/remotelog"
)

// JournalTail returns the newest limit journal entries (limit <= 0: none),
// newest first: what the status page shows. It reads only those entries,
// however long the journal is.
func (s *Store) JournalTail(limit int) ([]remotelog.JournalEntry, error) {
	if limit <= 0 {
		return nil, nil
	}
	db, done := s.read()
	defer done()
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{journalTag}, UpperBound: []byte{journalTag + 1}})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []remotelog.JournalEntry
	for it.Last(); it.Valid() && len(out) < limit; it.Prev() {
		var e remotelog.JournalEntry
		if err := json.Unmarshal(it.Value(), &e); err != nil {
			return nil, fmt.Errorf("rlmm: decode journal entry: %w", err)
		}
		out = append(out, e)
	}
	return out, it.Error()
}
