package rsm_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/chunked"
	"github.com/tierd/tierd/rsm/memory"
)

// TestRewrapRotation: copies made under three KEKs in turn all read
// while the keyring holds the three; after Rewrap of every manifest to
// the third, a keyring of the third alone reads every copy byte for byte,
// and the first two can be removed. Rewrap changes only the envelope:
// every data object keeps its bytes, and a second Rewrap is a no-op.
func TestRewrapRotation(t *testing.T) {
	ctx := context.Background()
	fixtures := fixtureLogs(t)
	keys := map[string][]byte{}
	for _, id := range []string{"kek-1", "kek-2", "kek-3"} {
		_, k := testKeyring(t, id)
		keys[id] = k[id]
	}
	ring := func(current string, ids ...string) *chunked.Keyring {
		sub := map[string][]byte{}
		for _, id := range ids {
			sub[id] = keys[id]
		}
		kr, err := chunked.NewKeyring(sub, current)
		if err != nil {
			t.Fatal(err)
		}
		return kr
	}
	o := chunked.DefaultConfig()
	o.ChunkBytes, o.Compression, o.Encryption = 64<<10, true, true
	b := memory.New()
	type made struct {
		meta remotelog.SegmentMetadata
		fx   fixtureLog
		kek  string
	}
	var copies []made
	for i, kek := range []string{"kek-1", "kek-2", "kek-3"} {
		ids := []string{"kek-1", "kek-2", "kek-3"}[:i+1]
		m, err := rsm.NewManager(b, rsm.Config{Prefix: "p", Objects: o, Keys: ring(kek, ids...)})
		if err != nil {
			t.Fatal(err)
		}
		for j := i; j < len(fixtures); j += 3 {
			meta, mf := copyFixture(t, m, fixtures[j])
			if mf.Encryption.KEKID != kek {
				t.Fatalf("new copy under %q, want %q", mf.Encryption.KEKID, kek)
			}
			copies = append(copies, made{meta, fixtures[j], kek})
		}
	}
	all, _ := rsm.NewManager(b, rsm.Config{Prefix: "p", Objects: o, Keys: ring("kek-3", "kek-1", "kek-2", "kek-3")})
	only3, _ := rsm.NewManager(b, rsm.Config{Prefix: "p", Objects: o, Keys: ring("kek-3", "kek-3")})
	dataBefore := map[string][]byte{}
	for _, c := range copies {
		if got, err := readRange(all, c.meta, 0, -1); err != nil || !bytes.Equal(got, c.fx.data) {
			t.Fatalf("%s under %s: %d bytes, %v", c.fx.name, c.kek, len(got), err)
		}
		_, err := readRange(only3, c.meta, 0, -1)
		if c.kek != "kek-3" && !errors.Is(err, chunked.ErrKeyUnavailable) {
			t.Fatalf("%s under %s read without its KEK: %v", c.fx.name, c.kek, err)
		}
		dataBefore[c.meta.ID.String()] = stored(t, all, all.Key(c.meta, ".log"))
	}
	moved := map[string]int{}
	for _, c := range copies {
		res, err := all.Rewrap(ctx, all.Key(c.meta, rsm.ManifestSuffix))
		if err != nil {
			t.Fatal(err)
		}
		if res.From != c.kek || res.To != "kek-3" || res.Changed != (c.kek != "kek-3") {
			t.Fatalf("%s: rewrap %+v", c.fx.name, res)
		}
		moved[res.From]++
	}
	t.Logf("moved by KEK: %v", moved)
	fresh, _ := rsm.NewManager(b, rsm.Config{Prefix: "p", Objects: o, Keys: ring("kek-3", "kek-3")})
	for _, c := range copies {
		for _, m := range []*rsm.Manager{all, fresh} {
			if got, err := readRange(m, c.meta, 0, -1); err != nil || !bytes.Equal(got, c.fx.data) {
				t.Fatalf("%s after rewrap: %d bytes, %v", c.fx.name, len(got), err)
			}
		}
		if err := fresh.VerifyCopy(ctx, c.meta); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(stored(t, fresh, fresh.Key(c.meta, ".log")), dataBefore[c.meta.ID.String()]) {
			t.Fatalf("%s: rewrap rewrote the .log", c.fx.name)
		}
		res, err := fresh.Rewrap(ctx, fresh.Key(c.meta, rsm.ManifestSuffix))
		if err != nil || res.Changed {
			t.Fatalf("second rewrap: %+v, %v", res, err)
		}
	}
}

// raceBucket runs after once after a ReadVersioned of its key.
type raceBucket struct {
	rsm.Bucket
	key   string
	after func()
}

func (r *raceBucket) ReadVersioned(ctx context.Context, key string) ([]byte, rsm.Version, error) {
	data, v, err := r.Bucket.ReadVersioned(ctx, key)
	if key == r.key && r.after != nil {
		f := r.after
		r.after = nil
		f()
	}
	return data, v, err
}

// TestRewrapRaces: a manifest deleted or rewritten between Rewrap's read
// and its write is left as the other writer made it; a copy whose KEK is
// missing is an error naming the KEK, nothing written.
func TestRewrapRaces(t *testing.T) {
	ctx := context.Background()
	fx := largestFixture(t)
	kr1, k1 := testKeyring(t, "old")
	_, k2 := testKeyring(t, "new")
	o := chunked.DefaultConfig()
	o.Encryption = true
	mem := memory.New()
	m1, _ := rsm.NewManager(mem, rsm.Config{Prefix: "p", Objects: o, Keys: kr1})
	both, _ := chunked.NewKeyring(map[string][]byte{"old": k1["old"], "new": k2["new"]}, "new")
	rb := &raceBucket{Bucket: mem}
	m2, _ := rsm.NewManager(rb, rsm.Config{Prefix: "p", Objects: o, Keys: both})

	meta, _ := copyFixture(t, m1, fx)
	key := m1.Key(meta, rsm.ManifestSuffix)
	good := stored(t, m1, key)
	rb.key, rb.after = key, func() { putObject(t, m1, key, append(bytes.Clone(good), ' ')) }
	if _, err := m2.Rewrap(ctx, key); !errors.Is(err, rsm.ErrPreconditionFailed) {
		t.Fatalf("rewrap of a manifest rewritten meanwhile: %v", err)
	}
	if got := stored(t, m1, key); !bytes.Equal(got, append(bytes.Clone(good), ' ')) {
		t.Fatal("rewrap overwrote the other writer's manifest")
	}
	putObject(t, m1, key, good)
	rb.after = func() {
		if err := mem.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m2.Rewrap(ctx, key); !errors.Is(err, rsm.ErrPreconditionFailed) && !errors.Is(err, rsm.ErrNotFound) {
		t.Fatalf("rewrap of a manifest deleted meanwhile: %v", err)
	}
	if _, err := mem.Attributes(ctx, key); !errors.Is(err, rsm.ErrNotFound) {
		t.Fatalf("rewrap brought a deleted manifest back: %v", err)
	}
	putObject(t, m1, key, good)
	onlyNew, _ := chunked.NewKeyring(map[string][]byte{"new": k2["new"]}, "new")
	m3, _ := rsm.NewManager(mem, rsm.Config{Prefix: "p", Objects: o, Keys: onlyNew})
	if _, err := m3.Rewrap(ctx, key); !errors.Is(err, chunked.ErrKeyUnavailable) {
		t.Fatalf("rewrap without the old KEK: %v", err)
	}
	if !bytes.Equal(stored(t, m1, key), good) {
		t.Fatal("a failed rewrap wrote")
	}
}
