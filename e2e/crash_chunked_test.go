package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/daemon"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/chunked"
)

// chunkedCrashPoints are the steps of a copy in chunked form (compressed
// and encrypted) where TestCrashChunked kills the daemon: the row
// written, every data object stored but not the manifest (which holds the
// only wrapped copy of the data key), the manifest stored, the row
// finished.
var chunkedCrashPoints = []string{"copy.started", "copy.objects-uploaded", "copy.uploaded", "copy.finished"}

// rewrapCrashPoints are the steps of rsm.Manager.Rewrap where
// TestCrashRewrap kills "tierd keys rewrap": a manifest read and its data
// key wrapped again, not yet written; the manifest written.
var rewrapCrashPoints = []string{"rewrap.read", "rewrap.written"}

// chunkedChunkBytes is the chunk size of the chunked crash tests.
const chunkedChunkBytes = 65536

// chunkedObjects is an objects: section (for newCrashRig's extra) that
// stores new copies in chunks of chunkedChunkBytes, compressed and
// encrypted under the KEK current, with the KEK files keys (id: path).
func chunkedObjects(current string, keys map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "objects:\n  chunk.size: %d\n  compression.enabled: true\n  encryption.enabled: true\n  encryption.key.id: %s\n  encryption.keys:\n",
		chunkedChunkBytes, current)
	for _, id := range slices.Sorted(maps.Keys(keys)) {
		fmt.Fprintf(&b, "    %s: %s\n", id, keys[id])
	}
	return b.String()
}

// chunkedManager is a Manager over the rig's bucket with the keys a
// daemon given chunkedObjects(current, keys) has (daemon.ManagerConfig).
func (r *crashRig) chunkedManager(current string, keys map[string]string) *rsm.Manager {
	r.t.Helper()
	o := config.Objects{Config: chunked.DefaultConfig(), EncryptionKeyID: current, EncryptionKeys: keys}
	o.ChunkBytes, o.Compression, o.Encryption = chunkedChunkBytes, true, true
	mc, err := daemon.ManagerConfig(o, "")
	if err != nil {
		r.t.Fatal(err)
	}
	m, err := rsm.NewManager(r.direct, mc)
	if err != nil {
		r.t.Fatal(err)
	}
	return m
}

// newKEK writes a KEK file at p with "tierd keys new" and checks its mode
// (0600) and form (64 hex digits and a newline).
func newKEK(t *testing.T, bin, p string) {
	t.Helper()
	if out, err := exec.Command(bin, "keys", "new", p).CombinedOutput(); err != nil {
		t.Fatalf("tierd keys new %s: %v\n%s", p, err, out)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(p); fi.Mode().Perm() != 0o600 || len(data) != 65 || data[64] != '\n' {
		t.Fatalf("tierd keys new wrote %s with mode %v, %d bytes", p, fi.Mode().Perm(), len(data))
	}
}

// storedManifest is a manifest as the bucket holds it.
type storedManifest struct {
	raw     []byte
	members map[string]json.RawMessage // compacted
	mf      *rsm.Manifest              // as m read it
}

// readStored reads every object of the bucket, and returns the manifests
// among them by key, raw and as m reads them (a test error for one that
// does not parse or read).
func (r *crashRig) readStored(ctx context.Context, m *rsm.Manager) map[string]storedManifest {
	r.t.Helper()
	var keys []string
	if err := r.direct.Iter(ctx, "", func(k string) error {
		if strings.HasSuffix(k, rsm.ManifestSuffix) {
			keys = append(keys, k)
		}
		return nil
	}); err != nil {
		r.t.Fatalf("list the bucket: %v", err)
	}
	out := map[string]storedManifest{}
	for _, k := range keys {
		raw, err := readObject(ctx, r.direct, k)
		if err != nil {
			r.t.Errorf("%s: %v", k, err)
			continue
		}
		var members map[string]json.RawMessage
		if err := json.Unmarshal(raw, &members); err != nil {
			r.t.Errorf("%s does not parse: %v\n%s", k, err, raw)
			continue
		}
		for name, v := range members {
			var c bytes.Buffer
			if err := json.Compact(&c, v); err != nil {
				r.t.Fatal(err)
			}
			members[name] = c.Bytes()
		}
		mf, err := m.ReadManifest(ctx, k)
		if err != nil {
			r.t.Errorf("%s does not read: %v", k, err)
			continue
		}
		out[k] = storedManifest{raw: raw, members: members, mf: mf}
	}
	return out
}

func readObject(ctx context.Context, b rsm.Bucket, key string) ([]byte, error) {
	rc, err := b.GetRange(ctx, key, 0, -1)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// checkChunked checks every manifest in the bucket and the copy it
// describes, read through m: a chunked copy (format version 3) encrypted
// (an "encryption" envelope and a "mac", no "digest") under one of keks;
// its .log in chunks of chunkedChunkBytes, compressed (stored in less
// than a quarter of its bytes: value() repeats one byte) and holding none
// of the records' plaintext; every object whole (VerifyCopy: each chunk's
// CRC, seal and size); and its .log, decoded, the records value(offset)
// of every offset of its range in order, byte for byte. It returns the
// manifests by key.
func (r *crashRig) checkChunked(ctx context.Context, m *rsm.Manager, keks ...string) map[string]storedManifest {
	r.t.Helper()
	stored := r.readStored(ctx, m)
	for k, s := range stored {
		mf := s.mf
		var v int
		json.Unmarshal(s.members["formatVersion"], &v)
		var env rsm.Envelope
		json.Unmarshal(s.members["encryption"], &env)
		if v != rsm.ChunkedFormatVersion || s.members["encryption"] == nil || mf.MAC == "" || s.members["digest"] != nil {
			r.t.Errorf("%s: not a chunked encrypted copy's manifest:\n%s", k, s.raw)
			continue
		}
		if !slices.Contains(keks, env.KEKID) || mf.Encryption == nil || mf.Encryption.KEKID != env.KEKID {
			r.t.Errorf("%s: wrapped by %q, want one of %v", k, env.KEKID, keks)
		}
		lo := mf.Objects[".log"]
		if c := lo.Chunked; c == nil || c.ChunkBytes != chunkedChunkBytes || c.OriginalSize != mf.SizeInBytes || c.OriginalCRC32C != "" {
			r.t.Errorf("%s: the .log is not in chunks of %d bytes of an encrypted copy: %+v", k, chunkedChunkBytes, c)
		}
		if lo.Size*4 >= mf.SizeInBytes {
			r.t.Errorf("%s: the .log of %d bytes is stored in %d: not compressed", k, mf.SizeInBytes, lo.Size)
		}
		if data, err := readObject(ctx, r.direct, lo.Key); err != nil || int64(len(data)) != lo.Size || bytes.Contains(data, []byte("offset ")) {
			r.t.Errorf("%s: stored .log of %d bytes (manifest: %d) holds the records' plaintext, or does not read: %v", k, len(data), lo.Size, err)
		}
		meta := mf.Metadata()
		if err := m.VerifyCopy(ctx, meta); err != nil {
			r.t.Errorf("%s: %v", k, err)
		}
		rc, err := m.FetchLogSegment(ctx, meta, 0, -1)
		if err != nil {
			r.t.Errorf("%s: fetch the .log: %v", k, err)
			continue
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || int64(len(data)) != mf.SizeInBytes {
			r.t.Errorf("%s: the .log reads %d of its %d bytes: %v", k, len(data), mf.SizeInBytes, err)
			continue
		}
		recs, err := records(data)
		if err != nil {
			r.t.Errorf("%s: %v", k, err)
			continue
		}
		next := mf.StartOffset
		for _, rec := range recs {
			if rec.Offset != next || !bytes.Equal(rec.Value, value(rec.Offset)) {
				r.t.Errorf("%s: offset %d reads wrong (want offset %d's value)", k, rec.Offset, next)
				break
			}
			next++
		}
		if next != mf.EndOffset+1 {
			r.t.Errorf("%s: the .log holds offsets %d to %d, the copy is of %d to %d", k, mf.StartOffset, next-1, mf.StartOffset, mf.EndOffset)
		}
	}
	return stored
}

// TestCrashChunked is TestCrash for copies in chunked form, compressed
// and encrypted under a KEK from a file: each round rolls two segments
// (one round a segment of ~6.5 MB, a hundred chunks) and kills the daemon
// at a step of their copy, each of chunkedCrashPoints at its first hit,
// then at its second, then twice at a random moment; once the metadata is
// lost too (the start rebuilds it from the encrypted manifests). After
// each restart the rig's checks (every offset reads back through the
// daemon, finished copies whole, nothing orphaned, no local segment
// deleted without a finished copy) and checkChunked's (every manifest in
// the bucket chunked and encrypted under the KEK, every copy decoded
// through the keys byte for byte) hold.
func TestCrashChunked(t *testing.T) {
	k1 := filepath.Join(t.TempDir(), "k1.key")
	keys := map[string]string{"k1": k1}
	r := newCrashRig(t, "chunked", chunkedObjects("k1", keys))
	newKEK(t, r.bin, k1)
	r.mgr = r.chunkedManager("k1", keys)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(13, 1))
	var tally crashTally
	hits := crashHits{}
	named := 2 * len(chunkedCrashPoints)
	checked := 0
	for round := range named + 2 {
		r.appendSegment(20 + rng.IntN(20))
		n := 20 + rng.IntN(20)
		if round == 5 {
			n = 1300
		}
		r.appendSegment(n)
		point := ""
		if round < named {
			point = fmt.Sprintf("%s:%d", chunkedCrashPoints[round%len(chunkedCrashPoints)], 1+round/len(chunkedCrashPoints))
		}
		r.start(point)
		if point == "" {
			time.Sleep(time.Duration(50+rng.IntN(300)) * time.Millisecond)
			r.kill()
		} else if r.exitedOrIdle(30*time.Second, nil) {
			hits.add(point)
		} else {
			r.kill()
		}
		tally.kills++
		if point == "copy.objects-uploaded:2" {
			// The first copy finished, the second's objects stored
			// without a manifest, and the rows lost.
			os.RemoveAll(filepath.Join(r.root, "meta"))
		}
		r.start("")
		resp, err := r.synced(time.Now().Add(60*time.Second), nil)
		if err != nil {
			r.failRound(round, point, err)
		}
		r.check(resp, &tally)
		finished := 0
		for _, s := range resp.Segments {
			if s.State == "COPY_SEGMENT_FINISHED" {
				finished++
			}
		}
		stored := r.checkChunked(ctx, r.mgr, "k1")
		if len(stored) != finished || finished == 0 {
			t.Errorf("round %d: %d manifests in the bucket, %d finished copies", round, len(stored), finished)
		}
		checked += len(stored)
		r.stop(round)
		r.failedRound(round, point)
	}
	fmt.Printf("chunked crash test: %d kills, %d lost offsets, %d orphan objects, %d unsafe local deletes, %d copies checked\n",
		tally.kills, tally.lost, tally.orphans, tally.unsafe, checked)
	t.Logf("kills at named steps, at their first+second hit: %s (the rest at random moments)", hits.format(chunkedCrashPoints))
	for _, p := range chunkedCrashPoints {
		if c := hits[p]; c[0] == 0 || c[1] == 0 {
			t.Errorf("crash point %s: reached at its first hit %d times, at its second %d", p, c[0], c[1])
		}
	}
	if tally.corrupt > 0 {
		t.Errorf("%d finished objects missing or corrupt", tally.corrupt)
	}
	if r.log.LocalLogStartOffset() == 0 {
		t.Error("local retention never ran")
	}
}

// runRewrap runs "tierd keys rewrap --config cfg", to kill itself at
// crashpoint ("": never), and returns its output and error.
func runRewrap(t *testing.T, bin, cfg, crashpoint string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "keys", "rewrap", "--config", cfg)
	cmd.Env = append(os.Environ(), "TIERD_CRASHPOINT="+crashpoint)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// killed reports whether err is the exit of a process killed by SIGKILL.
func killed(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// TestCrashRewrap: the daemon makes six copies encrypted under KEK k1 and
// stops; "tierd keys rewrap" to k2 (the config listing k1 and k2) is
// killed at each of rewrapCrashPoints, at several hits, and then run to
// its end. After every kill each manifest parses and reads with {k1, k2},
// every member but "encryption" as it was, its copy decoded byte for
// byte, and exactly the manifests the run wrote before its kill are
// under k2 (the rest under k1: nothing half-written). After the last run
// (exit 0) every copy is under k2 and reads byte for byte with a keyring
// of k2 alone (none with k1 alone), and a daemon with k2 alone serves
// every offset again.
func TestCrashRewrap(t *testing.T) {
	dir := t.TempDir()
	k1, k2 := filepath.Join(dir, "k1.key"), filepath.Join(dir, "k2.key")
	only1, both, only2 := map[string]string{"k1": k1}, map[string]string{"k1": k1, "k2": k2}, map[string]string{"k2": k2}
	r := newCrashRig(t, "rewrap", chunkedObjects("k1", only1))
	newKEK(t, r.bin, k1)
	newKEK(t, r.bin, k2)
	r.mgr = r.chunkedManager("k1", only1)
	ctx := context.Background()
	const copies = 6
	for i := range copies {
		r.appendSegment(20 + 3*i)
	}
	var tally crashTally
	r.start("")
	resp, err := r.synced(time.Now().Add(60*time.Second), nil)
	if err != nil {
		r.failRound(0, "", err)
	}
	r.check(resp, &tally)
	before := r.checkChunked(ctx, r.mgr, "k1")
	r.stop(0)
	r.failedRound(0, "")
	if len(before) != copies {
		t.Fatalf("%d manifests in the bucket, want %d", len(before), copies)
	}
	base, err := os.ReadFile(r.cfg)
	if err != nil {
		t.Fatal(err)
	}
	withObjects := func(name, objects string) string {
		t.Helper()
		cfg := strings.Replace(string(base), chunkedObjects("k1", only1), objects, 1)
		if cfg == string(base) {
			t.Fatal("the rig's config has no objects: section to replace")
		}
		p := filepath.Join(r.root, name)
		if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg12 := withObjects("rewrap.yaml", chunkedObjects("k2", both))

	// unchanged checks that every manifest is the one before the rewraps
	// in every member but "encryption", and counts those under k2.
	unchanged := func(stored map[string]storedManifest) (underK2 int) {
		t.Helper()
		if len(stored) != len(before) {
			t.Errorf("%d manifests in the bucket, %d before the rewraps", len(stored), len(before))
		}
		for k, s := range stored {
			b, ok := before[k]
			if !ok {
				t.Errorf("%s: a manifest that was not there before", k)
				continue
			}
			drop := func(m map[string]json.RawMessage) map[string]json.RawMessage {
				m = maps.Clone(m)
				delete(m, "encryption")
				return m
			}
			if !maps.EqualFunc(drop(b.members), drop(s.members), func(x, y json.RawMessage) bool { return bytes.Equal(x, y) }) {
				t.Errorf("%s: members other than the envelope changed:\n%s\nwas\n%s", k, s.raw, b.raw)
			}
			if s.mf.Encryption.KEKID == "k2" {
				underK2++
				if bytes.Equal(s.mf.Encryption.WrappedKey, b.mf.Encryption.WrappedKey) {
					t.Errorf("%s: under k2 with k1's wrapped key", k)
				}
			} else if !bytes.Equal(s.members["encryption"], b.members["encryption"]) {
				t.Errorf("%s: the envelope changed but is not k2's: %s", k, s.members["encryption"])
			}
		}
		return underK2
	}

	// Each run is killed at a step's nth hit: at rewrap.read's after
	// writing n-1 manifests, at rewrap.written's after writing n (the
	// manifests under k2 already are read and left alone, no hit).
	kills := []struct {
		point string
		moves int // manifests the run writes before its kill
	}{
		{"rewrap.read:1", 0}, {"rewrap.written:1", 1}, {"rewrap.read:2", 1}, {"rewrap.written:2", 2}, {"rewrap.read:2", 1},
	}
	moved := 0
	for _, c := range kills {
		out, err := runRewrap(t, r.bin, cfg12, c.point)
		if !killed(err) {
			t.Fatalf("tierd keys rewrap with %s: not killed at it: %v\n%s", c.point, err, out)
		}
		moved += c.moves
		stored := r.checkChunked(ctx, r.chunkedManager("k2", both), "k1", "k2")
		if n := unchanged(stored); n != moved {
			t.Errorf("killed at %s: %d copies under k2, want %d", c.point, n, moved)
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	out, err := runRewrap(t, r.bin, cfg12, "")
	if err != nil || !strings.Contains(out, fmt.Sprintf("moved %d copies to k2;", copies-moved)) ||
		!strings.Contains(out, "no copy is wrapped by k1 any more") {
		t.Fatalf("tierd keys rewrap: %v\n%s", err, out)
	}
	stored := r.checkChunked(ctx, r.chunkedManager("k2", only2), "k2")
	if n := unchanged(stored); n != copies {
		t.Errorf("after the last rewrap %d of %d copies are under k2", n, copies)
	}
	for _, s := range stored {
		if !bytes.Contains(s.raw, []byte(`"kekId": "k2"`)) {
			t.Errorf("manifest of %d without \"kekId\": \"k2\":\n%s", s.mf.StartOffset, s.raw)
		}
	}
	m1 := r.chunkedManager("k1", only1)
	for k := range stored {
		if _, err := m1.ReadManifest(ctx, k); !errors.Is(err, chunked.ErrKeyUnavailable) || !strings.Contains(err.Error(), "k2") {
			t.Errorf("%s reads with k1 alone: %v", k, err)
		}
	}

	// A daemon with k2 alone serves every offset (the rig's checks, its
	// copies read with k2 alone).
	r.cfg = withObjects("k2.yaml", chunkedObjects("k2", only2))
	r.mgr = r.chunkedManager("k2", only2)
	r.start("")
	resp, err = r.synced(time.Now().Add(60*time.Second), nil)
	if err != nil {
		r.failRound(1, "", err)
	}
	r.check(resp, &tally)
	r.stop(1)
	r.failedRound(1, "")
	fmt.Printf("rewrap crash test: %d kills, %d copies moved from k1 to k2, %d lost offsets, %d corrupt objects\n", len(kills), copies, tally.lost, tally.corrupt)
}
