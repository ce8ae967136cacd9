package statuspage

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tierd/tierd/internal/remotelog"
)

// fakeTiering and fakeMeta are in-memory sources for the rendering tests;
// the page against a running tierd and its real store is tested in
// cmd/tierd (TestStatusPageInChromium).
type fakeTiering remotelog.TieringStatus

func (f fakeTiering) Status() remotelog.TieringStatus { return remotelog.TieringStatus(f) }

type fakeMeta struct {
	rows      map[remotelog.TopicPartition][]remotelog.SegmentMetadata
	deletions []remotelog.PartitionDeletion
	journal   []remotelog.JournalEntry
	err       error
}

func (f fakeMeta) Segments(tp remotelog.TopicPartition) ([]remotelog.SegmentMetadata, error) {
	return f.rows[tp], f.err
}
func (f fakeMeta) Deletions(*remotelog.TopicPartition) ([]remotelog.PartitionDeletion, error) {
	return f.deletions, f.err
}
func (f fakeMeta) JournalTail(limit int) ([]remotelog.JournalEntry, error) { return f.journal, f.err }

var now = time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)

func testStatus() remotelog.TieringStatus {
	st := status(remotelog.TierWaiting, remotelog.WaitCorruptSegment, 0, -1)
	st.Topic, st.Partition = "orders", 2
	st.Detail = `segment 100 is corrupt at byte 61 (<script>alert("x")</script>)`
	st.Error = "scan: bad CRC"
	st.PendingSegments, st.PendingBytes = 2, 2048
	st.LastCopyMs = now.Add(-90 * time.Second).UnixMilli()
	return remotelog.TieringStatus{Running: true, Passes: 7, LastPassMs: now.Add(-time.Second).UnixMilli(), LastSuccessMs: -1,
		SkippedTopics: []string{"__consumer_offsets"}, Partitions: []remotelog.PartitionStatus{st}}
}

type settings struct {
	Bucket string `yaml:"bucket"`
	Kafka  struct {
		SASL struct {
			Username string `yaml:"username"`
			Password string `yaml:"password"`
		} `yaml:"sasl"`
	} `yaml:"kafka"`
}

func serve(t *testing.T, p *Page, method, target string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	resp := rec.Result()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// The page shows the status, the timeline, the journal and the config
// with its secret redacted; text from the status is escaped.
func TestPageRenders(t *testing.T) {
	tp := remotelog.TopicPartition{Topic: "orders", Partition: 2}
	meta := fakeMeta{rows: map[remotelog.TopicPartition][]remotelog.SegmentMetadata{tp: {row(0, 99, remotelog.CopySegmentFinished)}},
		journal: []remotelog.JournalEntry{{Seq: 4, TimeMs: now.UnixMilli(), Event: remotelog.JournalScheduled, TopicPartition: remotelog.TopicPartition{Topic: "gone"},
			Reason: remotelog.ReasonOperator, Proof: "ordered by alice@ops", Segments: 3, Bytes: 3 << 20}}}
	var cfg settings
	cfg.Bucket, cfg.Kafka.SASL.Username, cfg.Kafka.SASL.Password = "tiered", "tierd", "hunter2"
	p, err := New(DefaultConfig(), fakeTiering(testStatus()), meta, WithClock(func() time.Time { return now }),
		WithEffectiveConfig(func() any { return cfg }, func(key string) string {
			if key == "bucket" {
				return "file"
			}
			return ""
		}), WithReadiness(func() (bool, string) { return false, "bucket not reachable yet" }), WithFacts(Fact{"instance id", "abc"}))
	if err != nil {
		t.Fatal(err)
	}
	resp, body := serve(t, p, http.MethodGet, "/")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	for _, want := range []string{
		`<tr data-partition="orders-2" data-state="waiting" data-reason="corrupt_segment">`,
		`&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;`,
		`last error: scan: bad CRC`,
		`2 segments, 2.0 KiB`,
		`1m30s ago`,
		`7 passes`,
		`1 <span class="badge st-waiting">waiting</span> (corrupt_segment 1)`,
		`__consumer_offsets`,
		`not ready</span>: bucket not reachable yet`,
		`instance id: <b>abc</b>`,
		`data-state="remote" data-start="0" data-end="99"`,
		`<tr data-seq="4" data-event="scheduled">`,
		`ordered by alice@ops`,
		`bucket: tiered # file`,
		`password: (set, not shown)`,
		`username: tierd`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	for _, bad := range []string{"hunter2", "<script>", "http-equiv"} {
		if strings.Contains(body, bad) {
			t.Errorf("page holds %q", bad)
		}
	}
	if _, body := serve(t, p, http.MethodGet, "/?refresh=5"); !strings.Contains(body, `<meta http-equiv="refresh" content="5">`) {
		t.Error("?refresh=5 has no meta refresh")
	}
	if resp, _ := serve(t, p, http.MethodGet, "/other"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("/other: %d", resp.StatusCode)
	}
	if resp, _ := serve(t, p, http.MethodPost, "/"); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", resp.StatusCode)
	}
	if resp, body := serve(t, p, http.MethodHead, "/"); resp.StatusCode != http.StatusOK || body != "" {
		t.Errorf("HEAD: %d %q", resp.StatusCode, body)
	}
}

// What cannot be read is named on the page, which is still served.
func TestPageNamesWhatFailed(t *testing.T) {
	p, err := New(DefaultConfig(), fakeTiering(testStatus()), fakeMeta{err: errors.New("pebble: closed")})
	if err != nil {
		t.Fatal(err)
	}
	resp, body := serve(t, p, http.MethodGet, "/")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "orders-2: metadata rows: pebble: closed") ||
		!strings.Contains(body, "deletion journal: pebble: closed") || strings.Contains(body, "Effective config") {
		t.Fatalf("%d\n%s", resp.StatusCode, body)
	}
}

func TestConfigValidate(t *testing.T) {
	err := Config{JournalEntries: -1}.Validate()
	if err == nil || !strings.Contains(err.Error(), "journal_entries -1") || !strings.Contains(err.Error(), "timeline_segments 0") {
		t.Fatalf("%v", err)
	}
	if _, err := New(DefaultConfig(), nil, fakeMeta{}); err == nil {
		t.Fatal("New without a status source")
	}
}

// Secrets are values under secret names; files naming them, sections and
// empty values are shown.
func TestConfigYAMLRedacts(t *testing.T) {
	type tls struct {
		KeyFile    string `yaml:"key_file"`
		PrivateKey string `yaml:"private_key"`
	}
	v := struct {
		Password     string            `yaml:"password"`
		Empty        string            `yaml:"secret_access_key"`
		PasswordFile string            `yaml:"password_file"`
		Tokens       map[string]string `yaml:"tokens"` // a section, its keys shown
		Creds        []string          `yaml:"credentials"`
		TLS          tls               `yaml:"tls"`
		Unset        *int64            `yaml:"unset_override"` // inherited: left out
	}{Password: "p1", PasswordFile: "/etc/pw", Tokens: map[string]string{"a": "b"}, Creds: []string{"c1", "c2"}, TLS: tls{"/k.pem", "k2"}}
	y, err := ConfigYAML(v, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"password: (set, not shown)\n", "secret_access_key: \"\"\n", "password_file: /etc/pw\n", "  a: b\n",
		"credentials: ['(set, not shown)', '(set, not shown)']\n", "  key_file: /k.pem\n", "  private_key: (set, not shown)\n"} {
		if !strings.Contains(y, want) {
			t.Errorf("lacks %q:\n%s", want, y)
		}
	}
	for _, bad := range []string{"p1", "c1", "k2", "#", "unset_override", "null"} {
		if strings.Contains(y, bad) {
			t.Errorf("holds %q:\n%s", bad, y)
		}
	}
}

// TestStoredText: the remote size tells what chunked copies take in the
// bucket and how many are encrypted, and says nothing when no copy is
// chunked.
func TestStoredText(t *testing.T) {
	for _, c := range []struct {
		p    remotelog.PartitionStatus
		want string
	}{
		{remotelog.PartitionStatus{RemoteSegments: 3, RemoteBytes: 3 << 20, RemoteStoredBytes: 3 << 20}, ""},
		{remotelog.PartitionStatus{RemoteSegments: 3, ChunkedSegments: 3, RemoteBytes: 3 << 20, RemoteStoredBytes: 1 << 20}, ", 1.0 MiB stored, all chunked"},
		{remotelog.PartitionStatus{RemoteSegments: 3, ChunkedSegments: 1, RemoteBytes: 3 << 20, RemoteStoredBytes: 2 << 20}, ", 2.0 MiB stored, 1 of 3 chunked"},
		{remotelog.PartitionStatus{RemoteSegments: 3, ChunkedSegments: 3, EncryptedSegments: 3, RemoteStoredBytes: 1 << 20}, ", 1.0 MiB stored, all chunked, all encrypted"},
		{remotelog.PartitionStatus{RemoteSegments: 3, ChunkedSegments: 2, EncryptedSegments: 1, RemoteStoredBytes: 2 << 20}, ", 2.0 MiB stored, 2 of 3 chunked, 1 encrypted"},
	} {
		if got := StoredText(c.p); got != c.want {
			t.Errorf("%+v: %q, want %q", c.p, got, c.want)
		}
	}
}
