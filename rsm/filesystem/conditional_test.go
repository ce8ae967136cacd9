package filesystem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/tierd/tierd/rsm"
)

const (
	racerDirEnv = "TIERD_TEST_CAS_DIR"
	counterKey  = "p/t-0/counter"
	increments  = 40
)

// TestConditionalAcrossProcesses runs several processes that each add 1
// to a counter object many times with read, PutIfMatch, retry: a lost
// update (two processes replacing the same version) would leave the
// counter short.
func TestConditionalAcrossProcesses(t *testing.T) {
	if os.Getenv(racerDirEnv) != "" {
		t.Skip("helper process")
	}
	dir := t.TempDir()
	b, err := New(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.PutIfAbsent(context.Background(), counterKey, []byte("0")); err != nil {
		t.Fatal(err)
	}
	const procs = 4
	cmds := make([]*exec.Cmd, procs)
	outs := make([]bytes.Buffer, procs)
	for i := range cmds {
		cmds[i] = exec.Command(os.Args[0], "-test.run=^TestConditionalRacer$", "-test.count=1")
		cmds[i].Env = append(os.Environ(), racerDirEnv+"="+dir)
		cmds[i].Stdout, cmds[i].Stderr = &outs[i], &outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("racer %d: %v\n%s", i, err, outs[i].String())
		}
	}
	data, _, err := b.ReadVersioned(context.Background(), counterKey)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(data), strconv.Itoa(procs*increments); got != want {
		t.Fatalf("counter %s after %d processes added %d each, want %s: updates were lost", got, procs, increments, want)
	}
	var keys []string
	b.Iter(context.Background(), "", func(k string) error { keys = append(keys, k); return nil })
	if fmt.Sprint(keys) != "["+counterKey+"]" {
		t.Errorf("objects listed: %v (the lock file and temporary files are not objects)", keys)
	}
}

// TestConditionalRacer is the helper process of
// TestConditionalAcrossProcesses.
func TestConditionalRacer(t *testing.T) {
	dir := os.Getenv(racerDirEnv)
	if dir == "" {
		t.Skip("run by TestConditionalAcrossProcesses")
	}
	b, err := New(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for done := 0; done < increments; {
		data, v, err := b.ReadVersioned(ctx, counterKey)
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(string(data))
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.PutIfMatch(ctx, counterKey, []byte(strconv.Itoa(n+1)), v)
		switch {
		case err == nil:
			done++
		case !errors.Is(err, rsm.ErrPreconditionFailed):
			t.Fatal(err)
		}
	}
}
