package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// keptDemo runs "tierd demo --keep" once and returns the kept directory and
// a config naming it (three finished copies of demo-0 in a filesystem
// bucket).
func keptDemo(t *testing.T) (keep, cfgPath string) {
	t.Helper()
	keep = filepath.Join(t.TempDir(), "keep")
	var out, errOut bytes.Buffer
	if err := demo(context.Background(), demoOptions{keep: keep, runID: "verify"}, &out, &errOut); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	return keep, keptConfig(t, keep, "tierd-demo-verify")
}

// bucketObject returns the path of the one object of the kept bucket whose
// name ends in suffix and starts with the 20-digit base offset.
func bucketObject(t *testing.T, keep string, base, suffix string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(keep, "bucket", "tierd-demo-verify", "demo-0", base+"-*"+suffix))
	if len(m) != 1 {
		t.Fatalf("objects %s-*%s: %v", base, suffix, m)
	}
	return m[0]
}

// TestVerify: every finished copy of the demo verifies; a flipped byte in
// one .log (same size) is a MISMATCH naming the copy, a deleted index
// object is MISSING, each with exit status 1; --sample 1 reads one copy;
// progress goes to stderr as plain lines (not a terminal), the summary to
// stdout.
func TestVerify(t *testing.T) {
	keep, cfgPath := keptDemo(t)
	code, out, errOut := runCmd("verify", "--config", cfgPath)
	if code != 0 || !strings.Contains(out, "verified 3 copies") || !strings.Contains(out, "3 ok, 0 mismatched, 0 missing objects") {
		t.Fatalf("verify of good copies: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "3 finished copies from "+filepath.Join(keep, "metadata")+" (tierd not running)") || strings.Contains(errOut, "\r") {
		t.Errorf("stderr:\n%q", errOut)
	}
	code, out, _ = runCmd("verify", "--config", cfgPath, "--sample", "1")
	if code != 0 || !strings.Contains(out, "verified 1 copies") {
		t.Errorf("--sample 1: exit %d\n%s", code, out)
	}

	logPath := bucketObject(t, keep, "00000000000000000205", ".log")
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	os.WriteFile(logPath, data, 0o644)
	os.Remove(bucketObject(t, keep, "00000000000000000410", ".timeindex"))
	code, out, errOut = runCmd("verify", "--config", cfgPath)
	if code != 1 {
		t.Errorf("exit %d with a damaged and a missing object\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"MISMATCH demo-0 base offset 205 segment ", ".log: rsm: checksum mismatch",
		"MISSING demo-0 base offset 410 segment ", "1 ok, 1 mismatched, 1 missing objects"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = runCmd("verify", "--config", cfgPath, "--topic", "other")
	if code != 0 || !strings.Contains(out, "verified 0 copies") {
		t.Errorf("--topic other: exit %d\n%s", code, out)
	}
}

// TestProgress draws the bar as a terminal shows it and the plain lines
// otherwise, with a clock the test moves.
func TestProgress(t *testing.T) {
	var w bytes.Buffer
	now := time.Unix(1000, 0)
	p := newProgress(&w, true, "copies", 4, 4<<20)
	p.now = func() time.Time { return now }
	p.start = now
	now = now.Add(2 * time.Second)
	p.add(1 << 20)
	p.finish()
	p.tick()
	want := "\r[#######-----------------------] 1/4 copies, 1.0 MiB of 4.0 MiB (25%), 512.0 KiB/s\x1b[K"
	if w.String() != want {
		t.Fatalf("bar %q, want %q", w.String(), want)
	}
	w.Reset()
	var other bytes.Buffer
	p.println(&other, "MISMATCH x")
	if !strings.HasPrefix(w.String(), "\r\x1b[K") || other.String() != "MISMATCH x\n" || !strings.Contains(w.String(), "1/4 copies") {
		t.Errorf("println: terminal %q, out %q", w.String(), other.String())
	}
	p.close()
	if !strings.HasSuffix(w.String(), "\n") {
		t.Errorf("close leaves the line open: %q", w.String())
	}

	w.Reset()
	plain := newProgress(&w, false, "copies", 2, 2048)
	plain.now = func() time.Time { return now }
	plain.start, plain.lastPlain = now, now
	plain.tick()
	if w.Len() != 0 {
		t.Errorf("plain line before %s: %q", plainEvery, w.String())
	}
	now = now.Add(plainEvery)
	plain.add(1024)
	plain.tick()
	if w.String() != "0/2 copies, 1.0 KiB of 2.0 KiB (50%), 204 B/s\n" {
		t.Errorf("plain line %q", w.String())
	}
}

// TestVerifyOnTerminal runs "tierd verify" (this test binary acting as
// tierd) under a pseudo-terminal made by util-linux's script: stderr is a
// terminal, so the progress is a bar redrawn in place.
func TestVerifyOnTerminal(t *testing.T) {
	script, err := exec.LookPath("script")
	if err != nil {
		t.Skip("script (util-linux) is not installed")
	}
	_, cfgPath := keptDemo(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, script, "-q", "-e", "-c", self+" verify --config "+cfgPath, "/dev/null")
	cmd.Env = append(os.Environ(), asTierdEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("verify on a terminal: %v\n%q", err, out)
	}
	s := string(out)
	if !strings.Contains(s, "\r[##############################] 3/3 copies") || !strings.Contains(s, "verified 3 copies") {
		t.Errorf("no progress bar on the terminal:\n%q", s)
	}
}
