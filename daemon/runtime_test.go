package daemon

import (
	"os"
	"testing"

	"github.com/tierd/tierd/config"
)

// TestRuntimeFile: the runtime file a live process wrote reads back as
// written; one naming a process that is gone, or none, reads as absent.
func TestRuntimeFile(t *testing.T) {
	dir := t.TempDir()
	if _, ok := ReadRuntime(dir); ok {
		t.Fatal("a runtime file read from an empty dir")
	}
	want := Runtime{PID: os.Getpid(), FetchListen: "127.0.0.1:7450", HTTPListen: "127.0.0.1:7451", StartedMs: 1700000000000}
	if err := WriteRuntime(dir, want); err != nil {
		t.Fatal(err)
	}
	if got, ok := ReadRuntime(dir); !ok || got != want {
		t.Fatalf("read back %+v, %v; want %+v", got, ok, want)
	}
	gone := want
	gone.PID = 1 << 30 // above any pid_max: no such process
	if err := WriteRuntime(dir, gone); err != nil {
		t.Fatal(err)
	}
	if got, ok := ReadRuntime(dir); ok {
		t.Fatalf("the runtime file of a process that is gone read as live: %+v", got)
	}
}

// TestObjectsText: the start line says how new copies are stored.
func TestObjectsText(t *testing.T) {
	o := config.Default().Objects
	if got := objectsText(o); got != "as they came (objects: compression and encryption off)" {
		t.Errorf("off: %q", got)
	}
	o.Compression, o.Encryption, o.EncryptionKeys = true, true, map[string]string{"k2": "/k2", "k1": "/k1"}
	o.EncryptionKeyID = "k2"
	if got := objectsText(o); got != `chunked (zstd level 1, AES-256-GCM under KEK "k2"), 262144-byte chunks; KEKs listed: k1, k2` {
		t.Errorf("on: %q", got)
	}
}
