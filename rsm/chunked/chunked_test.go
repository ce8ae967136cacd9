package chunked

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// textLike returns n bytes of log-like text: compresses well.
func textLike(n int) []byte {
	var b bytes.Buffer
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, `{"ts":%d,"user":"u%04d","event":"click","path":"/items/%d"}`+"\n", 1700000000000+i, r.IntN(5000), r.IntN(100000))
	}
	return b.Bytes()[:n]
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func testSealer(t testing.TB, id string) *Sealer {
	t.Helper()
	keys, err := DeriveKeys(bytes.Repeat([]byte{7}, 32), id)
	if err != nil {
		t.Fatal(err)
	}
	return keys.Sealer
}

// encodeAll encodes data and returns the stored bytes and layout.
func encodeAll(t testing.TB, c *Codec, s *Sealer, data []byte) ([]byte, *Layout) {
	t.Helper()
	e := NewEncoder(bytes.NewReader(data), c, s, ".log")
	stored, err := io.ReadAll(e)
	if err != nil {
		t.Fatal(err)
	}
	l, err := e.Layout()
	if err != nil {
		t.Fatal(err)
	}
	if l.StoredSize() != int64(len(stored)) || l.OriginalSize != int64(len(data)) {
		t.Fatalf("layout says %d stored, %d original; got %d, %d", l.StoredSize(), l.OriginalSize, len(stored), len(data))
	}
	return stored, l
}

// readRange reads [start, end) with both readers, NewReader and
// NewReadAhead, and fails unless they return the same bytes and error.
func readRange(c *Codec, l *Layout, s *Sealer, stored []byte, start, end int64) ([]byte, error) {
	off, n, _, _ := l.StoredRange(start, end)
	var out bytes.Buffer
	_, err := NewReader(bytes.NewReader(stored[off:off+n]), c, l, s, ".log", start, end).WriteTo(&out)
	ra := NewReadAhead(io.NopCloser(bytes.NewReader(stored[off:off+n])), c, l, s, ".log", start, end)
	defer ra.Close()
	got, aerr := io.ReadAll(ra)
	if !bytes.Equal(got, out.Bytes()) || fmt.Sprint(aerr) != fmt.Sprint(err) {
		return nil, fmt.Errorf("read ahead: %d bytes, %v; read in turn: %d bytes, %v", len(got), aerr, out.Len(), err)
	}
	return out.Bytes(), err
}

// Every range of an object reads back as its original bytes, in every
// combination of compression and encryption, for text and random bytes,
// and a range fetches only the chunks it covers.
func TestRoundTripRanges(t *testing.T) {
	for _, comp := range []bool{false, true} {
		for _, enc := range []bool{false, true} {
			for _, kind := range []string{"text", "random", "empty", "one-byte", "exact"} {
				cfg := DefaultConfig()
				cfg.ChunkBytes = MinChunkBytes
				cfg.Compression, cfg.Encryption = comp, enc
				c, err := NewCodec(cfg)
				if err != nil {
					t.Fatal(err)
				}
				var data []byte
				switch kind {
				case "text":
					data = textLike(5*MinChunkBytes + 1234)
				case "random":
					data = randomBytes(3*MinChunkBytes + 17)
				case "one-byte":
					data = []byte{42}
				case "exact":
					data = textLike(2 * MinChunkBytes)
				}
				var s *Sealer
				if enc {
					s = testSealer(t, "t-0/seg")
				}
				stored, l := encodeAll(t, c, s, data)
				if comp && kind == "text" && len(stored) > len(data)/3 {
					t.Errorf("text stored in %d of %d bytes: compression did not pay", len(stored), len(data))
				}
				if kind == "random" && len(stored) > len(data)+len(l.Chunks)*sealOverhead {
					t.Errorf("random bytes grew to %d of %d", len(stored), len(data))
				}
				for _, ch := range l.Chunks {
					if kind == "random" && ch.Flags&FlagCompressed != 0 {
						t.Errorf("random chunk stored compressed")
					}
					if (ch.Flags&FlagEncrypted != 0) != enc {
						t.Errorf("chunk flags %#x, encryption %v", ch.Flags, enc)
					}
				}
				ranges := [][2]int64{{0, int64(len(data))}, {0, 1}, {int64(len(data)) / 2, int64(len(data))/2 + 100},
					{MinChunkBytes - 1, MinChunkBytes + 1}, {MinChunkBytes, 2 * MinChunkBytes}, {int64(len(data)) - 1, int64(len(data)) + 500}}
				for _, rg := range ranges {
					if rg[0] < 0 || rg[0] >= int64(len(data)) {
						continue
					}
					got, err := readRange(c, l, s, stored, rg[0], rg[1])
					if err != nil {
						t.Fatalf("%s comp=%v enc=%v range %v: %v", kind, comp, enc, rg, err)
					}
					want := data[rg[0]:min(rg[1], int64(len(data)))]
					if !bytes.Equal(got, want) {
						t.Fatalf("%s comp=%v enc=%v range %v: %d bytes differ from the %d original", kind, comp, enc, rg, len(got), len(want))
					}
					_, n, first, last := l.StoredRange(rg[0], rg[1])
					if wantFirst := int(rg[0] / MinChunkBytes); first != wantFirst || n > int64(last-first+1)*(MinChunkBytes+sealOverhead) {
						t.Fatalf("range %v: chunks %d-%d, %d stored bytes", rg, first, last, n)
					}
				}
			}
		}
	}
}

// A flipped byte anywhere in a stored chunk is detected, never returned
// as data; a chunk moved to another place, or opened under another
// copy's key, does not open.
func TestDamageDetected(t *testing.T) {
	for _, enc := range []bool{false, true} {
		cfg := DefaultConfig()
		cfg.ChunkBytes = MinChunkBytes
		cfg.Compression, cfg.Encryption = true, enc
		c, _ := NewCodec(cfg)
		var s *Sealer
		if enc {
			s = testSealer(t, "t-0/seg")
		}
		data := textLike(3 * MinChunkBytes)
		stored, l := encodeAll(t, c, s, data)
		for _, pos := range []int{0, 5, len(stored) / 2, len(stored) - 1} {
			bad := bytes.Clone(stored)
			bad[pos] ^= 0x10
			if _, err := readRange(c, l, s, bad, 0, int64(len(data))); !errors.Is(err, ErrDamaged) {
				t.Fatalf("enc=%v flipped byte %d: %v, want ErrDamaged", enc, pos, err)
			}
		}
		if !enc {
			continue
		}
		// The index agrees with swapped chunks (their CRCs swapped too):
		// only the seal's binding to the chunk number catches the swap.
		a, b := l.Chunks[0], l.Chunks[1]
		swapped := append(append(bytes.Clone(stored[a.StoredLen:a.StoredLen+b.StoredLen]), stored[:a.StoredLen]...), stored[a.StoredLen+b.StoredLen:]...)
		l2, err := NewLayout(l.ChunkBytes, l.OriginalSize, append([]Chunk{b, a}, l.Chunks[2:]...))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := readRange(c, l2, s, swapped, 0, 2*MinChunkBytes); !errors.Is(err, ErrDamaged) {
			t.Fatalf("swapped chunks: %v, want ErrDamaged", err)
		}
		if _, err := readRange(c, l, testSealer(t, "t-0/other"), stored, 0, 10); !errors.Is(err, ErrDamaged) {
			t.Fatalf("another copy's key: %v, want ErrDamaged", err)
		}
		if _, err := readRange(c, l, nil, stored, 0, 10); !errors.Is(err, ErrDamaged) {
			t.Fatalf("no key: %v, want ErrDamaged", err)
		}
	}
}

func TestIndexEncoding(t *testing.T) {
	chunks := []Chunk{{StoredLen: 1, Flags: 0, CRC32C: 0xdeadbeef}, {StoredLen: 1 << 22, Flags: 3, CRC32C: 1}}
	got, err := DecodeIndex(EncodeIndex(chunks))
	if err != nil || len(got) != 2 || got[0] != chunks[0] || got[1] != chunks[1] {
		t.Fatalf("round trip: %v %v", got, err)
	}
	for _, bad := range []string{"!!", "AQ=="} {
		if _, err := DecodeIndex(bad); !errors.Is(err, ErrBadIndex) {
			t.Errorf("DecodeIndex(%q): %v", bad, err)
		}
	}
	if _, err := NewLayout(10, 25, chunks); !errors.Is(err, ErrBadIndex) {
		t.Errorf("2 chunks for 25 bytes of 10: %v", err)
	}
	if _, err := NewLayout(1<<22, 5, []Chunk{{StoredLen: 5, Flags: 0x80}}); !errors.Is(err, ErrBadIndex) {
		t.Errorf("unknown flag: %v", err)
	}
}

// A wrapped data key opens only under its KEK and its copy's id; an
// unknown KEK is named in the error.
func TestKeyring(t *testing.T) {
	ctx := context.Background()
	k, err := NewKeyring(map[string][]byte{"a": bytes.Repeat([]byte{1}, 32), "b": bytes.Repeat([]byte{2}, 32)}, "b")
	if err != nil {
		t.Fatal(err)
	}
	dk, _ := NewDataKey()
	w, err := k.Wrap(ctx, "a", dk, WrapAAD("t-0/x"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := k.Unwrap(ctx, "a", w, WrapAAD("t-0/x")); err != nil || !bytes.Equal(got, dk) {
		t.Fatalf("unwrap: %v", err)
	}
	if _, err := k.Unwrap(ctx, "b", w, WrapAAD("t-0/x")); !errors.Is(err, ErrWrongKey) || !strings.Contains(err.Error(), `"b"`) {
		t.Fatalf("under another KEK: %v", err)
	}
	if _, err := k.Unwrap(ctx, "a", w, WrapAAD("t-0/y")); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("for another copy: %v", err)
	}
	if _, err := k.Unwrap(ctx, "gone", w, WrapAAD("t-0/x")); !errors.Is(err, ErrKeyUnavailable) || !strings.Contains(err.Error(), `"gone"`) {
		t.Fatalf("unknown KEK: %v", err)
	}
}

// KEK files: raw or hex, private; a readable or malformed file is
// refused with the id and path named and no key bytes.
func TestLoadKeyring(t *testing.T) {
	dir := t.TempDir()
	raw := filepath.Join(dir, "raw")
	hexf := filepath.Join(dir, "hex")
	os.WriteFile(raw, bytes.Repeat([]byte{0x89, 0x03}, 16), 0o600)
	os.WriteFile(hexf, []byte(strings.Repeat("ab", 32)+"\n"), 0o400)
	k, err := LoadKeyring(map[string]string{"r": raw, "h": hexf}, "h")
	if err != nil {
		t.Fatal(err)
	}
	if k.Current() != "h" || len(k.IDs()) != 2 {
		t.Fatalf("keyring %v current %s", k.IDs(), k.Current())
	}
	open := filepath.Join(dir, "open")
	os.WriteFile(open, bytes.Repeat([]byte{9}, 32), 0o644)
	if _, err := LoadKeyring(map[string]string{"o": open}, "o"); err == nil || !strings.Contains(err.Error(), "may read it") {
		t.Fatalf("world-readable key: %v", err)
	}
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("secretsecret"), 0o600)
	if _, err := LoadKeyring(map[string]string{"s": short}, "s"); err == nil || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), short) {
		t.Fatalf("malformed key: %v", err)
	}
	if _, err := LoadKeyring(map[string]string{"r": raw}, "x"); err == nil {
		t.Fatal("current key not among the keys: accepted")
	}
	text := filepath.Join(dir, "text")
	os.WriteFile(text, []byte(strings.Repeat("ab", 16)), 0o600) // 32 hex digits: 16 bytes of key
	if _, err := LoadKeyring(map[string]string{"t": text}, "t"); err == nil || !strings.Contains(err.Error(), "32 characters of text") || strings.Contains(err.Error(), "abab") {
		t.Fatalf("text key: %v", err)
	}
	big := filepath.Join(dir, "big")
	os.WriteFile(big, make([]byte, 500), 0o600)
	if _, err := LoadKeyring(map[string]string{"b": big}, "b"); err == nil || !strings.Contains(err.Error(), "holds 500 bytes") {
		t.Fatalf("500-byte key: %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err == nil {
		if _, err := LoadKeyring(map[string]string{"f": fifo}, "f"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("fifo: %v", err)
		}
	}
}

// The manifest MAC covers every member but the envelope and itself, in
// any formatting.
func TestCanonicalMAC(t *testing.T) {
	keys, _ := DeriveKeys(bytes.Repeat([]byte{5}, 32), "t-0/x")
	m := []byte(`{"topic": "t", "b": [1, 2], "encryption": {"kekId": "a"}}`)
	c1, _ := Canonical(m)
	withMAC, err := SetMembers(m, map[string]any{"mac": keys.MAC(c1), "encryption": map[string]string{"kekId": "b"}})
	if err != nil {
		t.Fatal(err)
	}
	c2, _ := Canonical(withMAC)
	if err := keys.CheckMAC(c2, keys.MAC(c1)); err != nil {
		t.Fatalf("re-wrapped, re-indented: %v", err)
	}
	edited := bytes.Replace(withMAC, []byte(`"t"`), []byte(`"u"`), 1)
	c3, _ := Canonical(edited)
	if err := keys.CheckMAC(c3, keys.MAC(c1)); !errors.Is(err, ErrBadMAC) {
		t.Fatalf("edited: %v", err)
	}
}

// TestOutcomes: text-like chunks are compressed; random ones are skipped
// by the heuristic's sample, or, with the heuristic off, stored as they
// came once compressing them gained nothing; nothing is counted as
// compressed with compression off.
func TestOutcomes(t *testing.T) {
	count := func(cfg Config, data []byte) map[Outcome]int {
		c, err := NewCodec(cfg)
		if err != nil {
			t.Fatal(err)
		}
		e := NewEncoder(bytes.NewReader(data), c, nil, ".log")
		if _, err := io.Copy(io.Discard, e); err != nil {
			t.Fatal(err)
		}
		got := map[Outcome]int{}
		e.Outcomes(func(o Outcome, n int) { got[o] = n })
		return got
	}
	cfg := DefaultConfig()
	cfg.ChunkBytes, cfg.Compression = MinChunkBytes*2, true
	n := 4 * cfg.ChunkBytes
	for _, c := range []struct {
		name string
		cfg  func(Config) Config
		data []byte
		want Outcome
	}{
		{"text", func(c Config) Config { return c }, textLike(n), Compressed},
		{"random", func(c Config) Config { return c }, randomBytes(n), SkippedBySample},
		{"random, no heuristic", func(c Config) Config { c.Heuristic = false; return c }, randomBytes(n), SkippedByNoGain},
		{"off", func(c Config) Config { c.Compression, c.Encryption = false, true; return c }, textLike(n), NotCompressing},
	} {
		got := count(c.cfg(cfg), c.data)
		if len(got) != 1 || got[c.want] != 4 {
			t.Errorf("%s: outcomes %v, want 4 %s", c.name, got, c.want)
		}
	}
}

// TestCraftedIndexRefused: chunk indexes no writer makes (a chunk size
// out of range, sizes that overflow, a chunk stored in more bytes than
// its original sealed) are refused before a reader indexes or allocates
// by them; a frame that decodes past its chunk's original size is
// damaged, whatever it would expand to.
func TestCraftedIndexRefused(t *testing.T) {
	const max64 = int64(^uint64(0) >> 1)
	for _, c := range []struct {
		name                 string
		chunkBytes, original int64
		chunks               []Chunk
	}{
		{"overflowing sizes", max64, max64, nil},
		{"chunk size 0", 0, 0, nil},
		{"chunk size of a GiB", 1 << 30, 1 << 30, []Chunk{{StoredLen: 1 << 30}}},
		{"original size past the bound", MaxChunkBytes, MaxOriginalSize + 1, nil},
		{"a chunk stored in a GiB", MinChunkBytes, 1000, []Chunk{{StoredLen: 1 << 30}}},
		{"a chunk stored in more than its bytes sealed", MinChunkBytes, 1000, []Chunk{{StoredLen: 1000 + sealOverhead + 1}}},
		{"a negative original size", MinChunkBytes, -1, nil},
	} {
		if _, err := NewLayout(c.chunkBytes, c.original, c.chunks); !errors.Is(err, ErrBadIndex) {
			t.Errorf("%s: %v, want ErrBadIndex", c.name, err)
		}
	}
	cfg := DefaultConfig()
	cfg.Compression = true
	codec, err := NewCodec(cfg)
	if err != nil {
		t.Fatal(err)
	}
	bomb := codec.enc.EncodeAll(make([]byte, 8<<20), nil) // 8 MiB of zeros in a few hundred bytes
	e := Chunk{StoredLen: int64(len(bomb)), Flags: FlagCompressed, CRC32C: crc32.Checksum(bomb, castagnoli)}
	if _, err := codec.Decode(nil, bomb, e, nil, ".log", 0, 64<<10); !errors.Is(err, ErrDamaged) {
		t.Errorf("a frame of 8 MiB for a 64 KiB chunk: %v, want ErrDamaged", err)
	}
	l, _ := NewLayout(MinChunkBytes, 100, []Chunk{{StoredLen: 100}})
	if _, err := NewReader(bytes.NewReader(make([]byte, 100)), codec, l, nil, ".log", -1, 50).Read(make([]byte, 10)); err == nil || err == io.EOF {
		t.Errorf("negative start: %v", err)
	}
}
