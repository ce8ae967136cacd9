package rsmapi

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
)

// hangGuard bounds a request that must be answered: a copy that hangs is
// the failure these tests look for, and the guard turns it into an error
// instead of a stuck test. It is not a speed assertion.
const hangGuard = 30 * time.Second

// TestFilesThatAreNotRegular: a FIFO named like one of the segment's
// files (the broker's user can make one), or a directory named like the
// .log, is refused at once as not a regular file: opening a FIFO for
// reading must not wait for a writer, holding a copy slot and the
// segment id's lock beyond rsm.copy_timeout and DELETE.
func TestFilesThatAreNotRegular(t *testing.T) {
	r := newRig(t)
	for i, tc := range []struct {
		name string
		make func(s *seg) (path string, err error)
	}{
		{"a FIFO as the .log", func(s *seg) (string, error) { return s.file(kafkalog.LogSuffix), mkfifo(s.file(kafkalog.LogSuffix)) }},
		{"a FIFO as the offset index", func(s *seg) (string, error) {
			return s.file(kafkalog.IndexSuffix), mkfifo(s.file(kafkalog.IndexSuffix))
		}},
		{"a FIFO as the producer snapshot", func(s *seg) (string, error) { return s.snapPath, mkfifo(s.snapPath) }},
		{"a directory as the .log", func(s *seg) (string, error) {
			p := s.file(kafkalog.LogSuffix)
			if err := os.Remove(p); err != nil {
				return p, err
			}
			return p, os.Mkdir(p, 0o755)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := r.layout(fixSmall, remotelog.TopicPartition{Topic: "orders", Partition: int32(i)})
			p, err := tc.make(s)
			if err != nil {
				t.Fatal(err)
			}
			// Whatever happens, let a reader stuck on the FIFO go at the end.
			t.Cleanup(func() { releaseFIFO(p) })
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			a, err := r.try(ctx, http.MethodPut, s.path(), s.body(), "-")
			if err != nil {
				t.Fatalf("the copy was not answered: %v", err)
			}
			if a.code != http.StatusBadRequest || !strings.Contains(string(a.body), "not a regular file") {
				t.Errorf("%d %s; want 400 naming a file that is not a regular file", a.code, a.body)
			}
			nothingStored(t, r)
		})
	}
}

func mkfifo(p string) error {
	if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
		return err
	}
	return syscall.Mkfifo(p, 0o644)
}

// releaseFIFO opens p for writing without blocking, if it is a FIFO, so
// that a reader blocked on it goes on.
func releaseFIFO(p string) {
	if st, err := os.Lstat(p); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		return
	}
	if f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		f.Close()
	}
}

// TestPartitionDirSwappedAfterTheCheck: the partition directory is
// replaced by a symbolic link out of rsm.log_dirs after the last file's
// path checks and before it is opened (a race the broker's user can run).
// The last file is the producer snapshot, which is stored as it is: a
// copy that followed the link would store the file outside, and GET
// index/PRODUCER_SNAPSHOT would hand it out. Nothing outside the log
// dirs may be read: the copy is refused and nothing is stored.
func TestPartitionDirSwappedAfterTheCheck(t *testing.T) {
	r := newRig(t)
	tp := remotelog.TopicPartition{Topic: "orders", Partition: 0}
	s := r.layout(fixSmall, tp)
	if s.snapPath == "" {
		t.Fatal("the fixture has no producer snapshot")
	}
	// Outside: the same file names, the snapshot holding a secret.
	outside := t.TempDir()
	for _, name := range []string{kafkalog.LogSuffix, kafkalog.IndexSuffix, kafkalog.TimeIndexSuffix} {
		data, err := os.ReadFile(s.file(name))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(outside, filepath.Base(s.file(name))), data, 0o644)
	}
	secret := []byte("root's secret, outside rsm.log_dirs")
	os.WriteFile(filepath.Join(outside, filepath.Base(s.snapPath)), secret, 0o600)
	swapped := false
	afterPathCheck = func(p string) {
		if swapped || p != s.snapPath {
			return
		}
		swapped = true
		if err := os.Rename(s.dir, s.dir+".aside"); err != nil {
			t.Error(err)
		}
		if err := os.Symlink(outside, s.dir); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { afterPathCheck = nil })
	a := r.do(http.MethodPut, s.path(), s.body(), "-")
	if !swapped {
		t.Fatal("the hook did not run at the producer snapshot")
	}
	if a.code == http.StatusOK {
		got := r.do(http.MethodGet, s.path()+"/index/PRODUCER_SNAPSHOT", nil, "-")
		t.Errorf("a copy through a partition directory swapped for a link out of the log dirs succeeded; "+
			"its producer snapshot is the file outside: %v", bytes.Equal(got.body, secret))
	} else if a.code != http.StatusForbidden || a.reason() != "PATH_NOT_ALLOWED" {
		t.Errorf("%d %s; want 403 PATH_NOT_ALLOWED", a.code, a.body)
	}
	if a.code != http.StatusOK {
		nothingStored(t, r)
	}
}

// TestLogDirThatIsALink: a log dir configured as a symbolic link (the
// operator's) is followed; the broker's paths may name it by either
// spelling.
func TestLogDirThatIsALink(t *testing.T) {
	real := filepath.Join(t.TempDir(), "real-logs")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "kafka-logs")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, withConfig(func(c *Config) { c.LogDirs = []string{link} }))
	r.logDir = link
	for i, base := range []string{link, real} {
		s := r.layout(fixSmall, remotelog.TopicPartition{Topic: "orders", Partition: int32(i)})
		for _, k := range []string{"logSegment", "offsetIndex", "timeIndex", "producerSnapshot"} {
			s.req[k] = filepath.Join(base, strings.TrimPrefix(s.req[k].(string), link))
		}
		r.copy(s)
		checkRoundTrip(t, r, s)
	}
}

// TestFilesChangedAfterTheCheck: the broker's files are rewritten in
// place (the same inode: the handles see it) after tierd checked them
// and before it uploads them. tierd stores only what it checked: a .log
// whose bytes changed fails the copy, nothing stored; an index is
// uploaded as the bytes that were checked.
func TestFilesChangedAfterTheCheck(t *testing.T) {
	var rewrite func()
	r := newRig(t, withOptions(WithInspector(func(in InspectInput) (InspectResult, error) {
		res, err := Inspect(in)
		if rewrite != nil {
			rewrite()
		}
		return res, err
	})))
	overwrite := func(p string, at int64, b []byte) {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt(b, at); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("the .log", func(t *testing.T) {
		s := r.layout(fixOffsets, remotelog.TopicPartition{Topic: "orders", Partition: 0})
		rewrite = func() { overwrite(s.file(kafkalog.LogSuffix), 5000, []byte{s.log[5000] ^ 0xff}) }
		a := r.do(http.MethodPut, s.path(), s.body(), "-")
		if a.code == http.StatusOK {
			t.Errorf("a copy whose .log changed after its check succeeded")
		} else if !strings.Contains(string(a.body), "changed") {
			t.Errorf("%d %s; want an error saying the .log changed", a.code, a.body)
		}
		if keys := r.keys(); len(keys) != 0 {
			t.Errorf("objects stored: %v", keys)
		}
	})
	t.Run("the offset index", func(t *testing.T) {
		s := r.layout(fixOffsets, remotelog.TopicPartition{Topic: "orders", Partition: 1})
		if len(s.index) < 8 {
			t.Fatal("the fixture's offset index is empty")
		}
		// The first entry's position moves off its batch: the index still
		// parses, but no longer says where the offset is.
		rewrite = func() { overwrite(s.file(kafkalog.IndexSuffix), 4, []byte{0, 0, 0, 1}) }
		a := r.do(http.MethodPut, s.path(), s.body(), "-")
		rewrite = nil
		if a.code != http.StatusOK {
			t.Fatalf("%d %s", a.code, a.body)
		}
		checkRoundTrip(t, r, s) // the index read back is the one checked
	})
}

// TestPreallocatedLogCopied: a .log that ends in the zero tail of a
// preallocated file is copied without that tail, and the upload is
// proven to be the bytes checked (whose CRC covered the tail too).
func TestPreallocatedLogCopied(t *testing.T) {
	r := newRig(t)
	s := r.layout(fixOffsets, remotelog.TopicPartition{Topic: "orders", Partition: 0})
	file := append(append([]byte{}, s.log...), make([]byte, 300<<10)...)
	if err := os.WriteFile(s.file(kafkalog.LogSuffix), file, 0o644); err != nil {
		t.Fatal(err)
	}
	s.req["segmentSizeInBytes"] = len(file)
	a := r.copy(s)
	if !strings.Contains(string(a.body), fmt.Sprintf(`"bytes":%d`, len(s.log))) {
		t.Errorf("answer %s; want bytes %d (the zero tail left out)", a.body, len(s.log))
	}
	checkRoundTrip(t, r, s)
}

// TestIndexFileOverItsLimit: a transaction index or producer snapshot
// larger than an index may be (1 GiB, as for a copy by upload) is refused
// 413 before a byte of it is read: the plugin takes no index answer
// larger than that. (Sparse files: nothing is written to the disk.)
func TestIndexFileOverItsLimit(t *testing.T) {
	r := newRig(t)
	for i, k := range []string{"transactionIndex", "producerSnapshot"} {
		t.Run(k, func(t *testing.T) {
			s := r.layout(fixSmall, remotelog.TopicPartition{Topic: "orders", Partition: int32(i)})
			p := s.file(kafkalog.TxnIndexSuffix)
			if k == "producerSnapshot" {
				p = s.snapPath
			}
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			f.Truncate(maxIndexBytes + 1)
			f.Close()
			s.req[k] = p
			a := r.do(http.MethodPut, s.path(), s.body(), "-")
			if a.code != http.StatusRequestEntityTooLarge || a.reason() != "TOO_LARGE" {
				t.Errorf("%d %s; want 413 TOO_LARGE", a.code, a.body)
			}
			nothingStored(t, r)
		})
	}
}

// TestHardLinkToAnotherUsersFile: the broker's user hard-links a file it
// does not own (possible where fs.protected_hardlinks is 0) into its
// partition directory under a segment file's name: tierd, which may run
// as root, must not read it for it. The producer snapshot is the file
// that would be stored as it is and handed out again. A hard link to a
// file of the directory's own owner (a backup's, say) is fine: that user
// can read it anyway.
func TestHardLinkToAnotherUsersFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to make files of two owners")
	}
	const broker = 4242 // the broker's user
	r := newRig(t)
	outside := t.TempDir()
	for i, tc := range []struct {
		name  string
		owner int
		code  int
	}{
		{"a file of another user", 0, http.StatusForbidden},
		{"a file of the directory's owner", broker, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := r.layout(fixSmall, remotelog.TopicPartition{Topic: "orders", Partition: int32(i)})
			if err := os.Chown(s.dir, broker, broker); err != nil {
				t.Fatal(err)
			}
			target := filepath.Join(outside, fmt.Sprintf("secret-%d", i))
			data := s.snapshot
			if tc.owner != broker {
				data = []byte("root's secret, outside rsm.log_dirs")
			}
			if err := os.WriteFile(target, data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(target, tc.owner, tc.owner); err != nil {
				t.Fatal(err)
			}
			os.Remove(s.snapPath)
			if err := os.Link(target, s.snapPath); err != nil {
				t.Skipf("cannot hard-link across the test's dirs: %v", err)
			}
			a := r.do(http.MethodPut, s.path(), s.body(), "-")
			if a.code != tc.code {
				t.Errorf("%d %s; want %d", a.code, a.body, tc.code)
			}
			if tc.code != http.StatusOK {
				if got := r.do(http.MethodGet, s.path()+"/index/PRODUCER_SNAPSHOT", nil, "-"); got.code == http.StatusOK {
					t.Errorf("GET index/PRODUCER_SNAPSHOT hands out the other user's file: %q", got.body)
				}
			}
		})
	}
}
