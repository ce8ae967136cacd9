package compact

import (
	"fmt"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog/batch"
)

type modelRec struct {
	off        int64
	key, value []byte
}

// fuzzLog turns fuzz bytes into batches: each byte pair picks a key (one of
// six, or a null key), a tombstone or a value, a batch break and a codec.
func fuzzLog(t *testing.T, data []byte) ([][]byte, []modelRec) {
	var entries [][]byte
	var all []modelRec
	var cur []batch.Record
	codec := batch.CodecNone
	next := int64(0)
	flush := func() {
		if len(cur) == 0 {
			return
		}
		p := batch.NewParams(next, 0)
		p.Codec = codec
		raw, err := batch.AppendBatch(nil, p, cur, batch.Stdlib)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range cur {
			all = append(all, modelRec{off: next + int64(i), key: r.Key, value: r.Value})
		}
		entries = append(entries, raw)
		next += int64(len(cur))
		cur = nil
	}
	for i := 0; i+1 < len(data) && i < 400; i += 2 {
		a, b := data[i], data[i+1]
		r := batch.Record{Timestamp: int64(1000 + i)}
		if k := a % 7; k < 6 {
			r.Key = []byte{'k', '0' + k}
		}
		if b%5 != 0 {
			r.Value = []byte(fmt.Sprintf("v%d", i))
		}
		cur = append(cur, r)
		if a&0x80 != 0 {
			flush()
			if b&0x80 != 0 {
				codec = batch.CodecGzip
			} else {
				codec = batch.CodecNone
			}
		}
	}
	flush()
	return entries, all
}

type flatRec struct {
	off        int64
	key, value string
	null       bool
	tomb       bool
}

func records(t *testing.T, entries [][]byte) []flatRec {
	var out []flatRec
	prevLast := int64(-1)
	for _, e := range entries {
		b := header(t, e)
		if b.BaseOffset <= prevLast {
			t.Fatalf("batch at %d not after the previous batch's last offset %d", b.BaseOffset, prevLast)
		}
		prevLast = b.LastOffset
		recs, err := batch.Records(e, batch.Stdlib)
		if err != nil {
			t.Fatal(err)
		}
		if b.Control {
			continue
		}
		for _, r := range recs {
			if r.Offset < b.BaseOffset || r.Offset > b.LastOffset {
				t.Fatalf("record offset %d outside batch [%d, %d]", r.Offset, b.BaseOffset, b.LastOffset)
			}
			out = append(out, flatRec{off: r.Offset, key: string(r.Key), value: string(r.Value), null: r.Key == nil, tomb: r.Value == nil})
		}
	}
	return out
}

// FuzzCompact checks the filter against a model over two passes: the
// latest value of every key is never lost, no key appears twice, offsets
// only ascend, every kept record is an input record unchanged, null keys
// go, and tombstones stay after the first pass and go after the horizon.
func FuzzCompact(f *testing.F) {
	f.Add([]byte("\x01\x01\x02\x02\x81\x00\x01\x03\x83\x85\x04\x01"))
	f.Add([]byte("\x86\x01\x00\x05\x00\x01\x80\x80\x01\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, model := fuzzLog(t, data)
		if len(entries) == 0 {
			return
		}
		byOff := map[int64]modelRec{}
		latest := map[string]modelRec{}
		for _, r := range model {
			byOff[r.off] = r
			if r.key != nil {
				latest[string(r.key)] = r
			}
		}
		check := func(out []flatRec, tombsGone bool) {
			seen := map[string]bool{}
			prev := int64(-1)
			for _, r := range out {
				if r.off <= prev {
					t.Fatalf("offset %d after %d", r.off, prev)
				}
				prev = r.off
				m, ok := byOff[r.off]
				if !ok || string(m.key) != r.key || string(m.value) != r.value || (m.value == nil) != r.tomb || (m.key == nil) != r.null {
					t.Fatalf("kept record %+v is not the input record %+v", r, m)
				}
				if r.null {
					t.Fatalf("null-key record kept at %d", r.off)
				}
				if seen[r.key] {
					t.Fatalf("key %s kept twice", r.key)
				}
				seen[r.key] = true
				if latest[r.key].off != r.off {
					t.Fatalf("key %s kept at %d, latest is %d", r.key, r.off, latest[r.key].off)
				}
				if tombsGone && r.tomb {
					t.Fatalf("tombstone of %s kept past its horizon", r.key)
				}
			}
			for k, m := range latest {
				if m.value != nil || !tombsGone {
					if !seen[k] {
						t.Fatalf("latest record of %s (offset %d) lost", k, m.off)
					}
				}
			}
		}
		out, _ := pass(t, entries, 0, Options{NowMs: 5000, DeleteRetentionMs: 100})
		check(records(t, out), false)
		// A second pass after the horizon, with one more dirty batch of a
		// key of its own.
		out, fd := dirtyAt(t, out, model[len(model)-1].off+1, "zz")
		latest["zz"] = modelRec{off: fd, key: []byte("zz"), value: []byte("1")}
		byOff[fd] = latest["zz"]
		out2, _ := pass(t, out, fd, Options{NowMs: 5100, DeleteRetentionMs: 100})
		check(records(t, out2), true)
	})
}
