package chunked

import (
	"bytes"
	"io"
	"testing"
)

// BenchmarkReadRange reads a Fetch's range (1 MiB from a chunk's middle)
// of text-like data in each form, decoding the chunks in turn and ahead
// (NewReadAhead, its wall time on as many cores as GOMAXPROCS), beside
// the baseline of copying the same bytes out of memory as they are (the
// plain form's read).
func BenchmarkReadRange(b *testing.B) {
	data := textLike(16 << 20)
	const start, n = 5<<20 + 100<<10, 1 << 20
	for _, f := range []struct {
		name              string
		compress, encrypt bool
	}{{"baseline", false, false}, {"zstd", true, false}, {"aes", false, true}, {"zstd+aes", true, true}} {
		b.Run(f.name, func(b *testing.B) {
			if !f.compress && !f.encrypt {
				dst := make([]byte, n)
				b.SetBytes(n)
				for range b.N {
					copy(dst, data[start:start+n])
				}
				return
			}
			cfg := DefaultConfig()
			cfg.Compression, cfg.Encryption = f.compress, f.encrypt
			c, err := NewCodec(cfg)
			if err != nil {
				b.Fatal(err)
			}
			var s *Sealer
			if f.encrypt {
				s = testSealer(b, "t-0/x")
			}
			stored, l := encodeAll(b, c, s, data)
			off, sn, _, _ := l.StoredRange(start, start+n)
			b.Run("in-turn", func(b *testing.B) {
				b.SetBytes(n)
				for range b.N {
					r := NewReader(bytes.NewReader(stored[off:off+sn]), c, l, s, ".log", start, start+n)
					if _, err := r.WriteTo(io.Discard); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("ahead", func(b *testing.B) {
				b.SetBytes(n)
				buf := make([]byte, 32<<10)
				for range b.N {
					r := NewReadAhead(io.NopCloser(bytes.NewReader(stored[off:off+sn])), c, l, s, ".log", start, start+n)
					if _, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{r}, buf); err != nil {
						b.Fatal(err)
					}
					r.Close()
				}
			})
		})
	}
}
