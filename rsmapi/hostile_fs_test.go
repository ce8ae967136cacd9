package rsmapi

import (
	"bytes"
	"context"
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
