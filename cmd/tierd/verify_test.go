package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
// object is MISSING, each with exit status 1; --sample 1 reads one copy
// and the header names the seed that repeats the pick; --topic naming no
// partition is an error that lists the topics there are;
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
	code, out, errOut = runCmd("verify", "--config", cfgPath, "--sample", "1", "--seed", "7")
	if code != 0 || !strings.Contains(out, "verified 1 copy,") || !strings.Contains(errOut, "tierd verify: 1 finished copy (a random 1 of 3, --seed 7) from ") {
		t.Errorf("--sample 1: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "tierd verify: picked demo-0 at ") {
		t.Errorf("--sample 1 does not name the copy it picked:\n%s", errOut)
	}
	// The seed the header names picks the same copy again.
	_, _, again := runCmd("verify", "--config", cfgPath, "--sample", "1", "--seed", "7")
	if again != errOut {
		t.Errorf("--seed 7 twice:\n%s\n%s", errOut, again)
	}
	if _, _, errOut := runCmd("verify", "--config", cfgPath, "--sample", "5"); !strings.Contains(errOut, "3 finished copies from ") || strings.Contains(errOut, "picked") {
		t.Errorf("--sample above the copies: %s", errOut)
	}
	if code, _, errOut := runCmd("verify", "--config", cfgPath, "--seed", "7"); code != 2 || !strings.Contains(errOut, "--seed picks a --sample") {
		t.Errorf("--seed without --sample: exit %d: %s", code, errOut)
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
	code, out, errOut = runCmd("verify", "--config", cfgPath, "--topic", "other")
	if code != 1 || out != "" || !strings.Contains(errOut, `topic "other" has no partition in tierd's metadata; it holds topic demo`) {
		t.Errorf("--topic other: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = runCmd("verify", "--config", cfgPath, "--topic", "demo")
	if code != 1 || !strings.Contains(out, "verified 3 copies") {
		t.Errorf("--topic demo: exit %d\n%s", code, out)
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

// TestVerifyManifestVersions: a copy whose manifest is of format version
// 1 (rewritten by the test with each object's SHA-256 and no crc32c, as
// tierds before CRC-32C wrote it) verifies, and a byte flipped in its
// .log is then a MISMATCH; a manifest whose .log entry has no checksum is
// a MISMATCH saying so, not a copy that verified.
func TestVerifyManifestVersions(t *testing.T) {
	keep, cfgPath := keptDemo(t)
	oldPath := bucketObject(t, keep, "00000000000000000000", ".manifest.json")
	var mf map[string]any
	data, err := os.ReadFile(oldPath)
	if err == nil {
		err = json.Unmarshal(data, &mf)
	}
	if err != nil {
		t.Fatal(err)
	}
	mf["formatVersion"] = 1
	for _, v := range mf["objects"].(map[string]any) {
		o := v.(map[string]any)
		body, err := os.ReadFile(filepath.Join(keep, "bucket", filepath.FromSlash(o["key"].(string))))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(body)
		delete(o, "crc32c")
		o["sha256"] = hex.EncodeToString(sum[:])
	}
	data, _ = json.Marshal(mf)
	os.WriteFile(oldPath, data, 0o644)

	barePath := bucketObject(t, keep, "00000000000000000205", ".manifest.json")
	data, _ = os.ReadFile(barePath)
	var bare map[string]any
	if err := json.Unmarshal(data, &bare); err != nil {
		t.Fatal(err)
	}
	delete(bare["objects"].(map[string]any)[".log"].(map[string]any), "crc32c")
	data, _ = json.Marshal(bare)
	os.WriteFile(barePath, data, 0o644)

	code, out, errOut := runCmd("verify", "--config", cfgPath)
	for _, want := range []string{"2 ok, 1 mismatched, 0 missing objects", "MISMATCH demo-0 base offset 205 segment ", "records no checksum (neither crc32c nor sha256)"} {
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("verify with a version 1 manifest and one without a checksum: exit %d, output lacks %q\n%s%s", code, want, out, errOut)
		}
	}

	logPath := bucketObject(t, keep, "00000000000000000000", ".log")
	data, _ = os.ReadFile(logPath)
	data[len(data)/3] ^= 0x04
	os.WriteFile(logPath, data, 0o644)
	code, out, errOut = runCmd("verify", "--config", cfgPath)
	for _, want := range []string{"1 ok, 2 mismatched", "MISMATCH demo-0 base offset 0 segment ", ".log: rsm: checksum mismatch"} {
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("verify with a byte flipped under a version 1 manifest: exit %d, output lacks %q\n%s%s", code, want, out, errOut)
		}
	}
}
