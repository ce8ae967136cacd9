package rsmtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tierd/tierd/rsm"
)

// ExerciseCloseStalledBody checks that closing a GetRange body while a
// Read of it waits on a store that stopped sending mid-body (the proxy's
// StallBody) returns at once and ends that Read with an error, while the
// request's context is still live: what a reader that reads ahead of its
// caller (chunked.NewReadAhead) and the chunk cache's loads rely on. b
// reaches its store through proxy.
func ExerciseCloseStalledBody(t *testing.T, proxy *FaultProxy, b rsm.Bucket) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := "stalled/body.log"
	data := make([]byte, 4<<20)
	rand.Read(data)
	if err := b.Upload(ctx, key, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	proxy.SetRule(func(r *http.Request) Fault {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, key) {
			return StallBody
		}
		return Pass
	})
	defer proxy.SetRule(nil)
	rc, err := b.GetRange(ctx, key, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		n   int
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		n, err := io.ReadFull(rc, make([]byte, len(data)))
		done <- result{n, err, time.Now()}
	}()
	select {
	case r := <-done:
		t.Fatalf("the read of a stalled body returned %d bytes, %v, before Close", r.n, r.err)
	case <-time.After(500 * time.Millisecond): // the read waits for the stalled half
	}
	start := time.Now()
	rc.Close()
	if d := time.Since(start); d > time.Second {
		t.Errorf("%s: Close of a stalled body took %s (the request's context still live)", b.Name(), d.Round(time.Millisecond))
	}
	select {
	case r := <-done:
		if r.err == nil || r.n >= len(data) {
			t.Errorf("%s: the read waiting on a stalled body ended with %d bytes, %v; want an error", b.Name(), r.n, r.err)
		}
		if d := r.at.Sub(start); d > 2*time.Second {
			t.Errorf("%s: the waiting read ended %s after Close", b.Name(), d.Round(time.Millisecond))
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: the read waiting on a stalled body did not end within 5 s of Close", b.Name())
	}
	if ctx.Err() != nil {
		t.Fatalf("the test's context ended first: %v", ctx.Err())
	}
}
