package statuspage

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The page shows the broker-owned copies' section only with
// WithBrokerCopies, escapes its text, and names a failed read as a
// problem.
func TestBrokerCopiesSection(t *testing.T) {
	plain, err := New(DefaultConfig(), fakeTiering(testStatus()), fakeMeta{}, WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	if _, body := serve(t, plain, http.MethodGet, "/"); strings.Contains(body, "Broker-owned copies") {
		t.Error("the section is shown without an RSM endpoint")
	}
	b := BrokerCopies{Endpoint: "http://127.0.0.1:7452", Prefix: "_kafka-rsm", InFlight: 1, Stored: 3, StoredBytes: 3 << 20, Unfinished: 1,
		Copies: 5, CopyErrors: 2, LastError: `copy of <b>x</b>: 503`, LastErrorMs: now.Add(-time.Minute).UnixMilli(),
		Partitions: []BrokerPartition{{Topic: "orders", Partition: 0, Stored: 3, Bytes: 3 << 20, StartOffset: 0, EndOffset: 299, Started: 1, LastCopyMs: now.UnixMilli()}}}
	p, err := New(DefaultConfig(), fakeTiering(testStatus()), fakeMeta{}, WithClock(func() time.Time { return now }),
		WithBrokerCopies(func() (BrokerCopies, error) { return b, nil }))
	if err != nil {
		t.Fatal(err)
	}
	_, body := serve(t, p, http.MethodGet, "/")
	for _, want := range []string{"Broker-owned copies", "http://127.0.0.1:7452", "_kafka-rsm", "3 stored (3.0 MiB)", "1 in flight",
		`data-partition="orders-0"`, "0-299", "1 started, 0 deleting", "copy of &lt;b&gt;x&lt;/b&gt;: 503", "5 copies (2 failed)"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(body, "<b>x</b>") {
		t.Error("the last error is not escaped")
	}
	failing, _ := New(DefaultConfig(), fakeTiering(testStatus()), fakeMeta{}, WithClock(func() time.Time { return now }),
		WithBrokerCopies(func() (BrokerCopies, error) { return BrokerCopies{}, errors.New("catalogue closed") }))
	if _, body := serve(t, failing, http.MethodGet, "/"); !strings.Contains(body, "broker-owned copies: catalogue closed") {
		t.Error("a failed read of the broker-owned copies is not named a problem")
	}
}
