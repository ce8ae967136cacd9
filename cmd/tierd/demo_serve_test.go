package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuf is a bytes.Buffer safe for one writer and one reader.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestDemoServe: "tierd demo --serve" keeps serving after its checks and
// prints a kcat command; that command (run when kcat is installed, as CI
// installs it) reads every record with its key and header; the demo ends
// cleanly when interrupted.
func TestDemoServe(t *testing.T) {
	kafkaAddr, grpcAddr := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuf{}
	done := make(chan error, 1)
	go func() {
		done <- demo(ctx, demoOptions{runID: "serve", serve: true, kafka: kafkaAddr, grpc: grpcAddr}, out, &syncBuf{})
	}()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(out.String(), "serving the demo log") {
		select {
		case err := <-done:
			t.Fatalf("demo ended before serving: %v\n%s", err, out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("demo did not start serving:\n%s", out.String())
		}
	}
	for _, topic := range []string{demoTopic, demoKeyedTopic} {
		want := fmt.Sprintf("kcat -C -b %s -t %s -p 0 -o beginning -e", kafkaAddr, topic)
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
	if want := fmt.Sprintf("kcat -b %s -G demo-group", kafkaAddr); !strings.Contains(out.String(), want) {
		t.Fatalf("output lacks %q:\n%s", want, out.String())
	}
	if kcat, err := exec.LookPath("kcat"); err == nil {
		cmd := exec.Command(kcat, "-C", "-b", kafkaAddr, "-t", demoKeyedTopic, "-p", "0", "-o", "beginning", "-e", "-q", "-f", "%o %k %h\n")
		got, err := cmd.Output()
		if err != nil {
			t.Fatalf("kcat: %v", err)
		}
		lines := strings.Split(strings.TrimSuffix(string(got), "\n"), "\n")
		if len(lines) != demoKeyedRecords {
			t.Fatalf("kcat read %d records, want %d", len(lines), demoKeyedRecords)
		}
		for i, l := range lines {
			if w := fmt.Sprintf("%d key-%d tierd-demo-offset=%d", i, i, i); l != w {
				t.Fatalf("kcat line %d: %q, want %q", i, l, w)
			}
		}
		// The printed group command: the first run reads everything and
		// commits, the second nothing.
		for run, want := range []int{demoRecords, 0} {
			g := exec.Command(kcat, "-b", kafkaAddr, "-G", "demo-group", "-X", "auto.offset.reset=earliest", "-e", "-q", "-f", "%o\n", demoTopic)
			got, err := g.Output()
			if err != nil {
				t.Fatalf("kcat -G run %d: %v", run, err)
			}
			if n := len(strings.Fields(string(got))); n != want {
				t.Fatalf("kcat -G run %d read %d records, want %d", run, n, want)
			}
		}
	} else {
		t.Log("kcat not installed: the listener was checked by the demo's own franz-go read only")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("demo after interrupt: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("demo did not stop after the interrupt")
	}
}
