// Package instance gives a tierd its identity and keeps two tierds off the
// same Kafka log dirs.
//
// The instance id is 16 random bytes in URL-safe base64 (22 characters),
// created once and kept in the metadata dir as the file "tierd-instance-id"
// (one line), next to Pebble's files, written atomically (temporary file,
// fsync, rename, fsync of the dir). It goes into the ownership lease and
// every metadata row, so two tierds given one broker_id are told apart.
//
// Each log dir tierd tiers holds ".tierd.lock", locked with flock(2) for
// as long as tierd runs and holding the holder's instance id, pid and host
// as one JSON line (Holder). The lock refuses a second tierd on the same
// log dirs (with another metadata dir, it would copy the same partitions);
// the instance id left in the file lets a tierd whose metadata dir was lost
// take its identity back. Kafka ignores files in a log dir that it does not
// know.
package instance

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"

	"github.com/tierd/tierd/internal/kafkalog"
)

// Names of the files this package keeps.
const (
	IDFile   = "tierd-instance-id" // in the metadata dir
	LockFile = ".tierd.lock"       // in each log dir
)

// Errors of the package.
var (
	ErrBadID  = errors.New("instance: bad instance id")
	ErrLocked = errors.New("instance: log dir is in use by another tierd")
)

var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// NewID returns a new random instance id.
func NewID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// Read returns the instance id kept in dir, or "" when dir holds none.
// Errors: ErrBadID (wrapped) for a file that does not hold one, I/O
// errors.
func Read(dir string) (string, error) {
	p := filepath.Join(dir, IDFile)
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	id := string(bytes.TrimSpace(data))
	if !idPattern.MatchString(id) {
		return "", fmt.Errorf("%w: %s holds %q; restore it from a backup or the log dirs' %s, or delete it to make this tierd a new instance", ErrBadID, p, data, LockFile)
	}
	return id, nil
}

// Write keeps id in dir (created when missing), atomically: temporary
// file, fsync, rename, fsync dir.
func Write(dir, id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("%w: %q", ErrBadID, id)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return kafkalog.WriteFileAtomic(filepath.Join(dir, IDFile), []byte(id+"\n"))
}

// Load returns the instance id kept in dir. When dir holds none it keeps
// one there: recorded when not "" (see Recorded), else a new one. source
// says which: "metadata dir", "log dirs" or "new".
func Load(dir, recorded string) (id, source string, err error) {
	if id, err = Read(dir); err != nil || id != "" {
		return id, "metadata dir", err
	}
	source = "log dirs"
	if id = recorded; id == "" || !idPattern.MatchString(id) {
		if id, err = NewID(); err != nil {
			return "", "", err
		}
		source = "new"
	}
	return id, source, Write(dir, id)
}

// Holder is what a log dir's lock file records about the tierd holding it.
type Holder struct {
	InstanceID string `json:"instanceId"`
	PID        int    `json:"pid"`
	Host       string `json:"host,omitempty"`
}

func (h Holder) String() string {
	return fmt.Sprintf("instance %s, pid %d on %s", h.InstanceID, h.PID, h.Host)
}

// readHolder reads a lock file's record; a missing, empty or unreadable
// one gives the zero Holder.
func readHolder(p string) Holder {
	var h Holder
	data, err := os.ReadFile(p)
	if err == nil {
		_ = json.Unmarshal(bytes.TrimSpace(data), &h)
	}
	return h
}

// Recorded returns the instance id the lock files of dirs name, when at
// least one names one and none names another; "" otherwise.
func Recorded(dirs []string) string {
	id := ""
	for _, d := range dirs {
		h := readHolder(filepath.Join(d, LockFile))
		switch {
		case h.InstanceID == "":
		case id == "":
			id = h.InstanceID
		case id != h.InstanceID:
			return ""
		}
	}
	return id
}
