package daemon

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"syscall"
)

// RuntimeFile, in the metadata dir, says where the running tierd listens:
// the addresses it started with, which a refused reload (fetch.listen is
// static) does not change while the file's may. Tools read it when
// nothing answers at the file's fetch.listen.
const RuntimeFile = "tierd-runtime.json"

// Runtime is the content of RuntimeFile (JSON).
type Runtime struct {
	PID         int    `json:"pid"`
	FetchListen string `json:"fetchListen"`          // fetch.listen at start
	HTTPListen  string `json:"httpListen,omitempty"` // http.listen at start; "" when off
	StartedMs   int64  `json:"startedMs"`            // Unix ms
}

// WriteRuntime records info in metadata dir dir (tmp, rename); the error
// is the write's or the rename's.
func WriteRuntime(dir string, info Runtime) error {
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	p := filepath.Join(dir, RuntimeFile)
	if err := os.WriteFile(p+".tmp", append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(p+".tmp", p)
}

// ReadRuntime returns the runtime file in metadata dir dir of a tierd
// whose process is still alive; ok false when there is none (no file, one
// that does not parse, or its process gone).
func ReadRuntime(dir string) (info Runtime, ok bool) {
	data, err := os.ReadFile(filepath.Join(dir, RuntimeFile))
	if err != nil || json.Unmarshal(data, &info) != nil || info.PID <= 0 {
		return info, false
	}
	err = syscall.Kill(info.PID, 0)
	return info, err == nil || errors.Is(err, syscall.EPERM)
}
