package logview

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"

	"github.com/tierd/tierd/seglog"
)

// TestTopicsSharedTopicID: two topics whose partition.metadata files claim
// the same topic id (a partition directory copied under another name) get
// each its name-derived id instead, so a Fetch by id (v13+) never reads
// one topic's records for the other; a topic with an id of its own keeps
// it.
func TestTopicsSharedTopicID(t *testing.T) {
	r := newRig(t)
	shared := [16]byte{0x3f, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	own := [16]byte{0x7e, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9}
	for _, d := range []struct {
		dir string
		id  [16]byte
	}{{"orders-0", shared}, {"orders.copy-0", shared}, {"orders.copy-1", shared}, {"payments-0", own}} {
		dir := filepath.Join(r.logDir, d.dir)
		l, err := seglog.Open(dir, seglog.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(seglog.Record{Value: []byte(d.dir), Timestamp: 1}); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		md := "version: 0\ntopic_id: " + base64.RawURLEncoding.EncodeToString(d.id[:]) + "\n"
		if err := os.WriteFile(filepath.Join(dir, "partition.metadata"), []byte(md), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	topics, err := r.view.Topics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][16]byte{"orders": derivedTopicID("orders"), "orders.copy": derivedTopicID("orders.copy"), "payments": own}
	if len(topics) != len(want) {
		t.Fatalf("topics %+v", topics)
	}
	for _, tp := range topics {
		if tp.ID != want[tp.Name] {
			t.Errorf("topic %s: id %x, want %x", tp.Name, tp.ID, want[tp.Name])
		}
	}
}
