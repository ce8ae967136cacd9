package rlmm

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tierd/tierd/internal/remotelog"
)

// The consumer groups of tierd's Kafka listener (package
// listener/groups): each group's record and its committed offsets,
// values the coordinator encodes. Keys:
//
//	'g' len(2) group 'm'           -> the group's record
//	'g' len(2) group 'o' partition -> one committed offset
//
// Group writes are synced and counted, and leave the Generation as it
// is (no segment read depends on them).
const groupTag = 'g'

// maxGroupName is the longest group id a key holds: Kafka's strings have
// a 16-bit length.
const maxGroupName = 1<<15 - 1

func groupPrefix(group string) []byte {
	k := binary.BigEndian.AppendUint16([]byte{groupTag}, uint16(len(group)))
	return append(k, group...)
}

func groupRecordKey(group string) []byte { return append(groupPrefix(group), 'm') }

func groupOffsetKey(group string, tp remotelog.TopicPartition) []byte {
	return tpBytes(append(groupPrefix(group), 'o'), tp)
}

func checkGroupName(group string) error {
	if len(group) > maxGroupName {
		return fmt.Errorf("rlmm: group id of %d bytes: at most %d", len(group), maxGroupName)
	}
	return nil
}

// WriteGroup writes group's record (nil: unchanged) and offsets in one
// synced write. Errors: a group id longer than 32767 bytes, the store's.
func (s *Store) WriteGroup(group string, record []byte, offsets map[remotelog.TopicPartition][]byte) error {
	if err := checkGroupName(group); err != nil {
		return err
	}
	b := s.db().NewBatch()
	defer b.Close()
	if record != nil {
		if err := b.Set(groupRecordKey(group), record, nil); err != nil {
			return err
		}
	}
	for tp, v := range offsets {
		if err := b.Set(groupOffsetKey(group, tp), v, nil); err != nil {
			return err
		}
	}
	if b.Empty() {
		return nil
	}
	return s.commitBroker(b)
}

// DeleteGroup deletes group's offsets of partitions, or with nil
// partitions the group's record and every offset, in one synced write.
func (s *Store) DeleteGroup(group string, partitions []remotelog.TopicPartition) error {
	if err := checkGroupName(group); err != nil {
		return err
	}
	b := s.db().NewBatch()
	defer b.Close()
	if partitions == nil {
		p := groupPrefix(group)
		if err := b.DeleteRange(p, successor(p), nil); err != nil {
			return err
		}
	}
	for _, tp := range partitions {
		if err := b.Delete(groupOffsetKey(group, tp), nil); err != nil {
			return err
		}
	}
	if b.Empty() {
		return nil
	}
	return s.commitBroker(b)
}

// LoadGroups calls fn with every group kept, in key order: its record
// (nil when only offsets are kept) and offsets. fn's error stops it and
// is returned; so is a key it cannot read.
func (s *Store) LoadGroups(fn func(group string, record []byte, offsets map[remotelog.TopicPartition][]byte) error) error {
	db, done := s.read()
	defer done()
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{groupTag}, UpperBound: []byte{groupTag + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	var cur string
	var rec []byte
	var offs map[remotelog.TopicPartition][]byte
	started := false
	flush := func() error {
		if !started {
			return nil
		}
		return fn(cur, rec, offs)
	}
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) < 4 {
			return fmt.Errorf("rlmm: bad group key %q", k)
		}
		n := int(binary.BigEndian.Uint16(k[1:3]))
		if len(k) < 3+n+1 {
			return fmt.Errorf("rlmm: bad group key %q", k)
		}
		name, kind, rest := string(k[3:3+n]), k[3+n], k[3+n+1:]
		if !started || name != cur {
			if err := flush(); err != nil {
				return err
			}
			cur, rec, offs, started = name, nil, map[remotelog.TopicPartition][]byte{}, true
		}
		switch kind {
		case 'm':
			rec = append([]byte(nil), it.Value()...)
		case 'o':
			tp, err := decodeTP(rest)
			if err != nil {
				return err
			}
			offs[tp] = append([]byte(nil), it.Value()...)
		default:
			return errors.New("rlmm: bad group key kind")
		}
	}
	if err := it.Error(); err != nil {
		return err
	}
	return flush()
}
