// Package rsmtest holds the contract test every rsm.Bucket must pass, a
// launcher for a real MinIO server on 127.0.0.1 (plain or, with a
// self-signed certificate made by the test, TLS), and a fault-injecting
// proxy that can record the requests it forwards.
package rsmtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/tierd/tierd/rsm"
)

// AcceptanceTest runs the rsm.Bucket contract against b, which must be
// empty: it deletes keys and aborts uploads under "p/", so it refuses
// (fails at once) a bucket holding any object or incomplete upload.
// largeSize is the size of the object used to exercise multipart uploads
// (above the implementation's part size).
func AcceptanceTest(t *testing.T, b rsm.Bucket, largeSize int) {
	ctx := context.Background()
	if err := b.Iter(ctx, "", func(k string) error { return fmt.Errorf("it holds %s", k) }); err != nil {
		t.Fatalf("AcceptanceTest needs an empty bucket: %v", err)
	}
	if mb, ok := b.(rsm.MultipartBucket); ok {
		if ups, err := mb.IncompleteUploads(ctx, ""); err != nil || len(ups) > 0 {
			t.Fatalf("AcceptanceTest needs an empty bucket: incomplete uploads %v, %v", ups, err)
		}
	}
	get := func(key string, off, length int64) ([]byte, error) {
		rc, err := b.GetRange(ctx, key, off, length)
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		return io.ReadAll(rc)
	}
	data := []byte("0123456789abcdefghij")
	t.Run("upload and ranged reads", func(t *testing.T) {
		if err := b.Upload(ctx, "p/t-0/obj", bytes.NewReader(data), int64(len(data))); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			off, length int64
			want        string
		}{{0, -1, string(data)}, {0, 5, "01234"}, {10, 3, "abc"}, {15, -1, "fghij"}, {18, 10, "ij"}, {20, 5, ""}, {25, -1, ""}, {3, 0, ""}} {
			got, err := get("p/t-0/obj", tc.off, tc.length)
			if err != nil || string(got) != tc.want {
				t.Errorf("GetRange(%d, %d) = %q, %v; want %q", tc.off, tc.length, got, err, tc.want)
			}
		}
		attrs, err := b.Attributes(ctx, "p/t-0/obj")
		if err != nil || attrs.Size != int64(len(data)) {
			t.Errorf("Attributes = %+v, %v", attrs, err)
		}
	})
	t.Run("not found", func(t *testing.T) {
		if _, err := get("p/t-0/missing", 0, -1); !errors.Is(err, rsm.ErrNotFound) {
			t.Errorf("GetRange missing: %v", err)
		}
		if _, err := get("p/t-0/missing", 5, 10); !errors.Is(err, rsm.ErrNotFound) {
			t.Errorf("GetRange range of missing: %v", err)
		}
		if _, err := b.Attributes(ctx, "p/t-0/missing"); !errors.Is(err, rsm.ErrNotFound) {
			t.Errorf("Attributes missing: %v", err)
		}
		if err := b.Delete(ctx, "p/t-0/missing"); err != nil {
			t.Errorf("Delete missing: %v", err)
		}
	})
	t.Run("replace and delete", func(t *testing.T) {
		if err := b.Upload(ctx, "p/t-0/obj2", bytes.NewReader([]byte("old")), 3); err != nil {
			t.Fatal(err)
		}
		if err := b.Upload(ctx, "p/t-0/obj2", bytes.NewReader([]byte("newer")), 5); err != nil {
			t.Fatal(err)
		}
		if got, err := get("p/t-0/obj2", 0, -1); err != nil || string(got) != "newer" {
			t.Errorf("after replace: %q %v", got, err)
		}
		if err := b.Delete(ctx, "p/t-0/obj2"); err != nil {
			t.Fatal(err)
		}
		if _, err := get("p/t-0/obj2", 0, -1); !errors.Is(err, rsm.ErrNotFound) {
			t.Errorf("after delete: %v", err)
		}
	})
	t.Run("iter", func(t *testing.T) {
		for _, k := range []string{"p/t-1/b", "p/t-1/a", "p/t-1/sub/c", "p/t-1/sub-d", "p/t-10/x", "q/t-1/y", "p/orders..v2-0/o"} {
			if err := b.Upload(ctx, k, bytes.NewReader([]byte(k)), int64(len(k))); err != nil {
				t.Fatal(err)
			}
		}
		// Lexical order of whole keys ("sub-d" before "sub/c": '-' sorts
		// before '/'), prefixes that end mid-name, and prefixes that name
		// nothing.
		for _, tc := range []struct{ prefix, want string }{
			{"p/t-1/", "[p/t-1/a p/t-1/b p/t-1/sub-d p/t-1/sub/c]"},
			{"p/t-1", "[p/t-1/a p/t-1/b p/t-1/sub-d p/t-1/sub/c p/t-10/x]"},
			{"p/t-1/s", "[p/t-1/sub-d p/t-1/sub/c]"},
			{"p/t-1/sub", "[p/t-1/sub-d p/t-1/sub/c]"},
			{"p/t-1/sub/", "[p/t-1/sub/c]"},
			{"p/t-1/a", "[p/t-1/a]"},
			{"p/t-1/a/", "[]"},
			{"p/t-", "[p/t-0/obj p/t-1/a p/t-1/b p/t-1/sub-d p/t-1/sub/c p/t-10/x]"},
			{"q", "[q/t-1/y]"},
			{"p/none/", "[]"},
		} {
			var keys []string
			if err := b.Iter(ctx, tc.prefix, func(k string) error { keys = append(keys, k); return nil }); err != nil {
				t.Fatalf("Iter(%q): %v", tc.prefix, err)
			}
			if fmt.Sprint(keys) != tc.want {
				t.Errorf("Iter(%q) = %v, want %s", tc.prefix, keys, tc.want)
			}
		}
		if got, err := get("p/orders..v2-0/o", 0, -1); err != nil || string(got) != "p/orders..v2-0/o" {
			t.Errorf("a topic name with '..' (legal in Kafka): %q %v", got, err)
		}
		stop := errors.New("stop")
		n := 0
		if err := b.Iter(ctx, "p/", func(string) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
			t.Errorf("Iter did not stop on error: %v after %d", err, n)
		}
	})
	t.Run("large object streamed in parts", func(t *testing.T) {
		big := make([]byte, largeSize)
		rand.Read(big)
		if err := b.Upload(ctx, "p/t-2/big", io.LimitReader(bytes.NewReader(big), int64(len(big))), int64(len(big))); err != nil {
			t.Fatal(err)
		}
		got, err := get("p/t-2/big", 0, -1)
		if err != nil || !bytes.Equal(got, big) {
			t.Fatalf("big object: %d bytes, %v", len(got), err)
		}
		mid, err := get("p/t-2/big", int64(largeSize/2), 4096)
		if err != nil || !bytes.Equal(mid, big[largeSize/2:largeSize/2+4096]) {
			t.Fatalf("ranged read of big object: %v", err)
		}
	})
	t.Run("failed upload leaves nothing", func(t *testing.T) {
		r := io.MultiReader(bytes.NewReader(make([]byte, largeSize/2)), errReader{})
		if err := b.Upload(ctx, "p/t-3/broken", r, int64(largeSize)); err == nil {
			t.Fatal("upload from a failing reader succeeded")
		}
		if _, err := b.Attributes(ctx, "p/t-3/broken"); !errors.Is(err, rsm.ErrNotFound) {
			t.Errorf("object after failed upload: %v", err)
		}
		if mb, ok := b.(rsm.MultipartBucket); ok {
			if ups, err := mb.IncompleteUploads(ctx, "p/t-3/"); err != nil || len(ups) != 0 {
				t.Errorf("a failed upload left parts: %v %v", ups, err)
			}
			// Abort clears what a killed process would leave.
			if err := mb.AbortIncompleteUploads(ctx, "p/"); err != nil {
				t.Errorf("abort: %v", err)
			}
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := b.Upload(cctx, "p/t-3/cancelled", bytes.NewReader(data), int64(len(data))); err == nil {
			t.Error("upload with a cancelled context succeeded")
		}
	})
	if mb, ok := b.(rsm.MultipartBucket); ok {
		t.Run("abort the uploads of one key", func(t *testing.T) { abortByKeyTest(t, b, mb, largeSize) })
	}
	t.Run("conditional writes", func(t *testing.T) { conditionalTest(t, b) })
	t.Run("concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				key := fmt.Sprintf("p/t-4/%d", i)
				body := bytes.Repeat([]byte{byte(i)}, 1000+i)
				if err := b.Upload(ctx, key, bytes.NewReader(body), int64(len(body))); err != nil {
					errs <- err
					return
				}
				if got, err := get(key, 0, -1); err != nil || !bytes.Equal(got, body) {
					errs <- fmt.Errorf("%s read back %d bytes: %v", key, len(got), err)
				}
			}(i)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

// conditionalTest checks rsm.ConditionalWriter: create-if-absent and
// replace-if-match, and that of concurrent writers with one condition
// exactly one wins.
func conditionalTest(t *testing.T, b rsm.Bucket) {
	ctx := context.Background()
	const key = "p/t-5/_owner.json"
	read := func(key string) ([]byte, rsm.Version) {
		t.Helper()
		data, v, err := b.ReadVersioned(ctx, key)
		if err != nil {
			t.Fatalf("ReadVersioned %s: %v", key, err)
		}
		return data, v
	}
	if _, _, err := b.ReadVersioned(ctx, key); !errors.Is(err, rsm.ErrNotFound) {
		t.Fatalf("ReadVersioned of a missing key: %v", err)
	}
	if _, err := b.PutIfMatch(ctx, key, []byte("x"), "1"); !errors.Is(err, rsm.ErrPreconditionFailed) {
		t.Fatalf("PutIfMatch of a missing key: %v", err)
	}
	v1, err := b.PutIfAbsent(ctx, key, []byte("first"))
	if err != nil {
		t.Fatalf("PutIfAbsent: %v", err)
	}
	if _, err := b.PutIfAbsent(ctx, key, []byte("second")); !errors.Is(err, rsm.ErrPreconditionFailed) {
		t.Fatalf("second PutIfAbsent: %v", err)
	}
	if data, v := read(key); string(data) != "first" || v != v1 {
		t.Fatalf("after create: %q at %q, want \"first\" at %q", data, v, v1)
	}
	v2, err := b.PutIfMatch(ctx, key, []byte("replaced"), v1)
	if err != nil || v2 == v1 {
		t.Fatalf("PutIfMatch of the current version: %q %v (was %q)", v2, err, v1)
	}
	if _, err := b.PutIfMatch(ctx, key, []byte("stale"), v1); !errors.Is(err, rsm.ErrPreconditionFailed) {
		t.Fatalf("PutIfMatch of a stale version: %v", err)
	}
	if data, v := read(key); string(data) != "replaced" || v != v2 {
		t.Fatalf("after a stale write: %q at %q, want \"replaced\" at %q", data, v, v2)
	}
	// Racers: each round every writer reads the version, then all replace
	// it at once (or create the key) with bytes of their own.
	const racers, rounds = 6, 8
	for round := 0; round < rounds; round++ {
		rkey := fmt.Sprintf("p/t-5/race-%d", round%2)
		var v rsm.Version
		if round >= 2 {
			_, v = read(rkey)
		}
		start := make(chan struct{})
		wins := make(chan int, racers)
		var wg sync.WaitGroup
		for i := 0; i < racers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				body := []byte(fmt.Sprintf("round %d writer %d", round, i))
				var err error
				if round < 2 {
					_, err = b.PutIfAbsent(ctx, rkey, body)
				} else {
					_, err = b.PutIfMatch(ctx, rkey, body, v)
				}
				switch {
				case err == nil:
					wins <- i
				case !errors.Is(err, rsm.ErrPreconditionFailed):
					t.Errorf("round %d writer %d: %v", round, i, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		close(wins)
		var won []int
		for i := range wins {
			won = append(won, i)
		}
		if len(won) != 1 {
			t.Fatalf("round %d: %d writers won (%v), want exactly 1", round, len(won), won)
		}
		if data, _ := read(rkey); string(data) != fmt.Sprintf("round %d writer %d", round, won[0]) {
			t.Fatalf("round %d: stored %q, but writer %d won", round, data, won[0])
		}
	}
	for _, k := range []string{key, "p/t-5/race-0", "p/t-5/race-1"} {
		if err := b.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("disk read failed") }
