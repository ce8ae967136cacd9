package compact

import (
	"bytes"
	"fmt"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/index"
)

// Segment is one segment's .log contents with the offset it ends at (one
// past its last offset: the next segment's base offset).
type Segment struct {
	Log []byte
	End int64
}

// CompactSegments runs one whole cleaning over segs, which must be
// adjacent and in offset order: the offset map is built from the entries
// at or past firstDirty (each segment covered up to its End), then every
// entry is filtered with o. It returns the kept entries of all segments
// concatenated into one .log, and the .txnindex entries that log keeps.
// o.UpperBound is set to the last segment's End, so the output's last
// batch ends there as the input's did (empty if nothing else in it stays).
// A bad CRC or a malformed entry stops it with a corruption error
// (wrapping kafkalog.ErrCorrupt) naming the segment index and position.
func CompactSegments(segs []Segment, firstDirty int64, o Options) ([]byte, []index.AbortedTxn, error) {
	if len(segs) == 0 {
		return nil, nil, nil
	}
	m := NewOffsetMap(firstDirty, o.Aborted, o.Decompressor)
	for i, s := range segs {
		if s.End <= firstDirty {
			continue
		}
		if err := eachEntry(s.Log, func(raw []byte) error { return m.Add(raw) }); err != nil {
			return nil, nil, fmt.Errorf("segment %d of %d: %w", i, len(segs), err)
		}
		m.Cover(s.End)
	}
	o.UpperBound = segs[len(segs)-1].End
	f := NewFilter(m, o)
	var out []byte
	for i, s := range segs {
		err := eachEntry(s.Log, func(raw []byte) error {
			var err error
			out, _, err = f.Batch(out, raw)
			return err
		})
		if err != nil {
			return nil, nil, fmt.Errorf("segment %d of %d: %w", i, len(segs), err)
		}
	}
	return out, f.AbortedKept(), nil
}

// eachEntry calls fn with every entry of a .log's bytes, checking CRCs.
func eachEntry(data []byte, fn func(raw []byte) error) error {
	sc := batch.NewScanner(bytes.NewReader(data), int64(len(data)), batch.ScanOptions{VerifyCRC: true})
	for sc.Next() {
		b := sc.Batch()
		if !sc.CRCValid() {
			return kafkalog.Corruptf(b.Position, "CRC mismatch in entry at offset %d", b.LastOffset)
		}
		if err := fn(data[b.Position:b.End()]); err != nil {
			return err
		}
	}
	return sc.Err()
}
