package grpcapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/tierd/tierd/internal/testutil/readtest"
	testtools "github.com/tierd/tierd/internal/testutil/tools"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/seglog"
)

// switchable is a readiness function the test turns on and off.
type switchable struct{ on atomic.Bool }

func (s *switchable) ready() (bool, string) {
	if s.on.Load() {
		return true, ""
	}
	return false, "bucket not reachable yet"
}

// TestHealthFollowsReadiness: Check answers NOT_SERVING while readiness is
// false and SERVING once it is true, for the server as a whole and for
// tierd's service by name; an unknown service is NOT_FOUND; a Watch
// stream sees the change.
func TestHealthFollowsReadiness(t *testing.T) {
	var r switchable
	e := newEnv(t, DefaultConfig(), WithReadiness(r.ready))
	hc := e.client.Health()
	ctx := context.Background()
	check := func(svc string) healthpb.HealthCheckResponse_ServingStatus {
		t.Helper()
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil {
			t.Fatalf("Check(%q): %v", svc, err)
		}
		return resp.Status
	}
	for _, svc := range []string{"", "tierd.v1.RemoteFetch"} {
		if st := check(svc); st != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Errorf("not ready: Check(%q) = %v", svc, st)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	w, err := hc.Watch(wctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := w.Recv(); err != nil || m.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("first Watch message %v, %v", m, err)
	}
	r.on.Store(true)
	if m, err := w.Recv(); err != nil || m.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch after ready: %v, %v", m, err)
	}
	for _, svc := range []string{"", "tierd.v1.RemoteFetch"} {
		if st := check(svc); st != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("ready: Check(%q) = %v", svc, st)
		}
	}
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "no.such.Service"}); status.Code(err) != codes.NotFound {
		t.Errorf("unknown service: %v", err)
	}
	r.on.Store(false)
	if st := check(""); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("not ready again: %v", st)
	}
}

// TestReflectionListsServices asks the reflection service, as grpcurl
// does, for the services and for the file that defines RemoteFetch.
func TestReflectionListsServices(t *testing.T) {
	e := newEnv(t, DefaultConfig())
	rc := reflectionpb.NewServerReflectionClient(e.client.conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := rc.ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
	resp, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.Name)
	}
	for _, want := range []string{"tierd.v1.RemoteFetch", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
		if !slices.Contains(names, want) {
			t.Errorf("services %v lack %s", names, want)
		}
	}
	st.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "tierd.v1.RemoteFetch"}})
	if resp, err = st.Recv(); err != nil || len(resp.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
		t.Fatalf("file containing tierd.v1.RemoteFetch: %v %v", resp, err)
	}
}

// patientConfig waits for remote data as long as a request may take, so
// a slow machine (or the race detector) gives whole answers.
func patientConfig() Config {
	cfg := DefaultConfig()
	cfg.MaxWaitMs = cfg.RequestTimeout.Milliseconds()
	return cfg
}

// bigLog writes one rolled segment of about 6 MiB (1200 records of
// 5000 bytes) and tiers it.
func bigLog(t *testing.T, e *env) {
	dir := filepath.Join(t.TempDir(), "t-0")
	cfg := seglog.DefaultConfig()
	cfg.SegmentBytes = 16 << 20
	l, err := seglog.Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 1200; i++ {
		if _, err := l.Append(seglog.Record{Value: bytes.Repeat([]byte{byte(i)}, 5000), Timestamp: 1_000_000 + i}); err != nil {
			t.Fatal(err)
		}
	}
	l.Roll()
	l.Close()
	e.Tier(dir)
}

// TestResponseSizeLimit: a Fetch answer larger than 4 MiB is refused by a
// gRPC client with the default receive limit (what docs/reads.md tells other
// clients to raise) and read by grpcapi.Dial's client.
func TestResponseSizeLimit(t *testing.T) {
	e := newEnv(t, patientConfig())
	bigLog(t, e)
	req := &tierdpb.FetchRequest{Topic: "t", Partition: 0, Offset: 0, MaxBytes: 6 << 20}
	resp, err := e.api.Fetch(context.Background(), req)
	if err != nil || len(resp.Records) <= 4<<20 {
		t.Fatalf("grpcapi.Dial's client: %v, %d bytes", err, len(resp.GetRecords()))
	}
	conn, err := grpc.NewClient(e.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := tierdpb.NewRemoteFetchClient(conn).Fetch(context.Background(), req); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("default client, %d-byte answer: %v, want RESOURCE_EXHAUSTED", len(resp.Records), err)
	}
}

// TestGrpcurl runs grpcurl against the server, as docs/reads.md shows: list
// the services through reflection, check health, describe and call Fetch
// (whose 6 MiB answer needs -max-msg-sz).
func TestGrpcurl(t *testing.T) {
	grpcurl := testtools.Grpcurl(t)
	var r switchable
	e := newEnv(t, patientConfig(), WithReadiness(r.ready))
	bigLog(t, e)
	out, errOut, err := testtools.Run(grpcurl, "-plaintext", e.addr, "list")
	if err != nil {
		t.Fatalf("grpcurl list: %v\n%s", err, errOut)
	}
	lines := strings.Fields(out)
	for _, want := range []string{"tierd.v1.RemoteFetch", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
		if !slices.Contains(lines, want) {
			t.Errorf("grpcurl list: %q lacks %s", out, want)
		}
	}
	health := func() string {
		out, errOut, err := testtools.Run(grpcurl, "-plaintext", e.addr, "grpc.health.v1.Health/Check")
		if err != nil {
			t.Fatalf("grpcurl health check: %v\n%s", err, errOut)
		}
		var resp struct{ Status string }
		if err := json.Unmarshal([]byte(out), &resp); err != nil {
			t.Fatalf("grpcurl health check printed %q: %v", out, err)
		}
		return resp.Status
	}
	if st := health(); st != "NOT_SERVING" {
		t.Errorf("not ready: grpcurl says %s", st)
	}
	r.on.Store(true)
	if st := health(); st != "SERVING" {
		t.Errorf("ready: grpcurl says %s", st)
	}
	if out, errOut, err := testtools.Run(grpcurl, "-plaintext", e.addr, "describe", "tierd.v1.RemoteFetch.Fetch"); err != nil ||
		!strings.Contains(out, "rpc Fetch ( .tierd.v1.FetchRequest ) returns ( .tierd.v1.FetchResponse )") {
		t.Errorf("grpcurl describe: %v\n%s%s", err, out, errOut)
	}
	req := `{"topic": "t", "partition": 0, "offset": 0, "max_bytes": 6291456}`
	if _, errOut, err := testtools.Run(grpcurl, "-plaintext", "-d", req, e.addr, "tierd.v1.RemoteFetch/Fetch"); err == nil ||
		!strings.Contains(errOut, "larger than max") {
		t.Errorf("grpcurl with its default 4 MiB limit: %v\n%s", err, errOut)
	}
	out, errOut, err = testtools.Run(grpcurl, "-plaintext", "-max-msg-sz", "67108864", "-d", req, e.addr, "tierd.v1.RemoteFetch/Fetch")
	if err != nil {
		t.Fatalf("grpcurl Fetch with -max-msg-sz: %v\n%s", err, errOut)
	}
	var fr struct {
		Records    string `json:"records"`
		NextOffset string `json:"nextOffset"`
	}
	if err := json.Unmarshal([]byte(out), &fr); err != nil {
		t.Fatalf("grpcurl Fetch printed %.300q: %v", out, err)
	}
	recs, err := base64.StdEncoding.DecodeString(fr.Records)
	if err != nil || len(recs) <= 4<<20 || len(readtest.Batches(t, recs)) == 0 || fr.NextOffset == "" {
		t.Fatalf("grpcurl Fetch: %d record bytes, next offset %q, %v", len(recs), fr.NextOffset, err)
	}
	// FetchStream: its parts' records, concatenated, are Fetch's.
	req = `{"topic": "t", "partition": 0, "offset": 0, "max_bytes": 3145728}`
	out, errOut, err = testtools.Run(grpcurl, "-plaintext", "-d", req, e.addr, "tierd.v1.RemoteFetch/FetchStream")
	if err != nil {
		t.Fatalf("grpcurl FetchStream: %v\n%s", err, errOut)
	}
	var streamed []byte
	for dec := json.NewDecoder(strings.NewReader(out)); dec.More(); {
		if err := dec.Decode(&fr); err != nil {
			t.Fatalf("grpcurl FetchStream printed %.300q: %v", out, err)
		}
		b, err := base64.StdEncoding.DecodeString(fr.Records)
		if err != nil {
			t.Fatal(err)
		}
		streamed = append(streamed, b...)
	}
	want, err := e.fetch(0, 3<<20)
	if err != nil || len(streamed) == 0 || !bytes.Equal(streamed, want.Records) {
		t.Fatalf("grpcurl FetchStream: %d record bytes, Fetch %d (%v)", len(streamed), len(want.GetRecords()), err)
	}
}
