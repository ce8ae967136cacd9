package grpcapi

import (
	"bytes"
	"context"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tierd/tierd/internal/partlabels"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/internal/testutil/readtest"
	"github.com/tierd/tierd/proto/tierdpb"
	"github.com/tierd/tierd/remoteread"
)

// statusOperator is an Operator that also reports a status.
type statusOperator struct {
	fakeOperator
	s remotelog.TieringStatus
}

func (o statusOperator) Status() remotelog.TieringStatus { return o.s }

// filled sets every field of the struct v points to a value of its own
// (numbers 1, 2, 3, ... strings "s1", ...), so a conversion that drops a
// field shows.
func filled(v any) {
	n := 0
	var fill func(r reflect.Value)
	fill = func(r reflect.Value) {
		for i := 0; i < r.NumField(); i++ {
			f := r.Field(i)
			n++
			switch f.Kind() {
			case reflect.String:
				f.SetString("s" + strings.Repeat("x", n))
			case reflect.Int, reflect.Int32, reflect.Int64:
				f.SetInt(int64(n))
			case reflect.Bool:
				f.SetBool(true)
			case reflect.Pointer:
				f.Set(reflect.New(f.Type().Elem()))
				fill(f.Elem())
			case reflect.Slice:
				if f.Type().Elem().Kind() == reflect.String {
					f.Set(reflect.ValueOf([]string{"a", "b"}))
				}
			}
		}
	}
	fill(reflect.ValueOf(v).Elem())
}

// TestPartitionStatusRPC: the status goes over a real socket and back
// with every field; a topic filter keeps that topic's partitions; a
// server without a copier answers UNIMPLEMENTED.
func TestPartitionStatusRPC(t *testing.T) {
	var a, b remotelog.PartitionStatus
	filled(&a)
	filled(&b)
	a.Topic, b.Topic = "orders", "payments"
	var s remotelog.TieringStatus
	filled(&s)
	s.Partitions = []remotelog.PartitionStatus{a, b}
	e := newEnv(t, DefaultConfig(), WithAdmin(statusOperator{s: s}, e0(t), Identity{}))
	resp, err := e.local.Admin().PartitionStatus(context.Background(), &tierdpb.PartitionStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := StatusFromProto(resp); !reflect.DeepEqual(got, s) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, s)
	}
	resp, err = e.local.Admin().PartitionStatus(context.Background(), &tierdpb.PartitionStatusRequest{Topic: "payments"})
	if err != nil || len(resp.GetPartitions()) != 1 || resp.Partitions[0].Topic != "payments" {
		t.Fatalf("filtered: %+v %v", resp, err)
	}
	e = newEnv(t, DefaultConfig(), WithAdmin(fakeOperator{}, e0(t), Identity{}))
	if _, err := e.local.Admin().PartitionStatus(context.Background(), &tierdpb.PartitionStatusRequest{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("without a copier: %v", err)
	}
}

// TestDataLossLogged: a read answering DATA_LOSS is logged with the
// partition, the offset and the copy, once per offset, and counted as a
// failed remote fetch; a good read counts its bytes.
func TestDataLossLogged(t *testing.T) {
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	e := newEnv(t, DefaultConfig(), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))), WithRegisterer(reg),
		WithEngine(remoteread.WithPartitionLabels(partlabels.New(10))))
	readtest.ReferenceLog(t, e.Rig)
	good, err := e.fetch(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	fin, _ := e.Store.FinishedSegments(e.TP)
	if err := e.Bucket.Delete(context.Background(), e.Mgr.Key(fin[1], ".log")); err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{300, 300, 301} {
		if _, err := e.fetch(off, 1); status.Code(err) != codes.DataLoss {
			t.Fatalf("fetch %d: %v", off, err)
		}
	}
	// One ReadRemote of the Go API, the way logview (and so the Kafka
	// listener) reads.
	if _, err := e.srv.Engine().ReadRemote(context.Background(), e.TP, 302, 1); err == nil {
		t.Fatal("ReadRemote of a missing copy succeeded")
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	var loss []string
	for _, l := range lines {
		if strings.Contains(l, "DATA_LOSS") {
			loss = append(loss, l)
		}
	}
	if len(loss) != 3 {
		t.Fatalf("%d data-loss lines for reads of 300, 300, 301, 302, want 3:\n%s", len(loss), logs.String())
	}
	for i, off := range []string{"offset=300", "offset=301", "offset=302"} {
		if !strings.Contains(loss[i], "partition=t-0") || !strings.Contains(loss[i], off) || !strings.Contains(loss[i], "segment="+fin[1].ID.String()) {
			t.Errorf("line %q lacks the partition, %s or the segment", loss[i], off)
		}
	}
	own := []string{"topic", "t", "partition", "0"}
	if got := readtest.SeriesValue(t, reg, "tierd_remote_fetch_requests_total", own...); got != 5 {
		t.Errorf("requests %v, want 5", got)
	}
	if got := readtest.SeriesValue(t, reg, "tierd_remote_fetch_errors_total", own...); got != 4 {
		t.Errorf("errors %v, want 4", got)
	}
	if got := readtest.SeriesValue(t, reg, "tierd_remote_fetch_bytes_total", own...); got != float64(len(good.Records)) {
		t.Errorf("bytes %v, want %d", got, len(good.Records))
	}
}
