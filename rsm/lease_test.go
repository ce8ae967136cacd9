package rsm_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/memory"
)

// The lease is created once, replaced only at the version read, released
// with a marker (not deleted), and a lease object written before instance
// ids still reads.
func TestLeaseConditionalWrites(t *testing.T) {
	ctx := context.Background()
	b := memory.New()
	m, err := rsm.NewManager(b, rsm.Config{Prefix: "tierd"})
	if err != nil {
		t.Fatal(err)
	}
	tp := remotelog.TopicPartition{Topic: "orders", Partition: 3}
	if _, ok, err := m.ReadLease(ctx, tp); ok || err != nil {
		t.Fatalf("lease of a new partition: %v %v", ok, err)
	}
	a, err := m.CreateLease(ctx, tp, rsm.Owner{BrokerID: 1, InstanceID: "ia", RenewedMs: 10})
	if err != nil || a.Generation != 1 {
		t.Fatalf("create: %+v %v", a, err)
	}
	if _, err := m.CreateLease(ctx, tp, rsm.Owner{BrokerID: 2, InstanceID: "ib", RenewedMs: 10}); !errors.Is(err, rsm.ErrPreconditionFailed) {
		t.Fatalf("second create: %v", err)
	}
	got, ok, err := m.ReadLease(ctx, tp)
	if err != nil || !ok || got != a {
		t.Fatalf("read %+v %v %v, want %+v", got, ok, err, a)
	}
	a2, err := m.ReplaceLease(ctx, tp, got, rsm.Owner{BrokerID: 1, InstanceID: "ia", RenewedMs: 20})
	if err != nil || a2.Generation != 2 || a2.Version == a.Version {
		t.Fatalf("renew: %+v %v", a2, err)
	}
	if _, err := m.ReplaceLease(ctx, tp, got, rsm.Owner{BrokerID: 2, InstanceID: "ib", RenewedMs: 20}); !errors.Is(err, rsm.ErrPreconditionFailed) {
		t.Fatalf("replace of a stale version: %v", err)
	}
	rel, err := m.ReleaseLease(ctx, tp, a2, 30)
	if err != nil {
		t.Fatal(err)
	}
	got, _, _ = m.ReadLease(ctx, tp)
	if !got.Released || got.BrokerID != 1 || got.InstanceID != "ia" || got.RenewedMs != 30 || got.Generation != 3 || got.Version != rel.Version {
		t.Fatalf("after release: %+v", got)
	}
	// A lease object of an older tierd.
	old := []byte(`{"brokerId":4,"renewedMs":1700000000000}`)
	b.Upload(ctx, "tierd/orders-3/_owner.json", bytes.NewReader(old), int64(len(old)))
	got, ok, err = m.ReadLease(ctx, tp)
	if err != nil || !ok || got.BrokerID != 4 || got.RenewedMs != 1700000000000 || got.InstanceID != "" || got.Released {
		t.Fatalf("old lease: %+v %v %v", got, ok, err)
	}
	if _, err := m.ReplaceLease(ctx, tp, got, rsm.Owner{BrokerID: 4, InstanceID: "ic", RenewedMs: 40}); err != nil {
		t.Fatalf("replace of an old lease: %v", err)
	}
	b.Upload(ctx, "tierd/orders-3/_owner.json", bytes.NewReader([]byte("{")), 1)
	if _, _, err := m.ReadLease(ctx, tp); !errors.Is(err, rsm.ErrBadManifest) {
		t.Fatalf("garbage lease: %v", err)
	}
}

// A heartbeat is created once, replaced only at the version read, and a
// lease naming it is held while the heartbeat is renewed and not
// released, however old the lease object itself is.
func TestHeartbeatKeepsLeases(t *testing.T) {
	ctx := context.Background()
	m, err := rsm.NewManager(memory.New(), rsm.Config{Prefix: "tierd"})
	if err != nil {
		t.Fatal(err)
	}
	const lease = 60_000
	if _, ok, err := m.ReadHeartbeat(ctx, 1, "ia"); ok || err != nil {
		t.Fatalf("heartbeat of a new instance: %v %v", ok, err)
	}
	h1, err := m.WriteHeartbeat(ctx, nil, rsm.Heartbeat{BrokerID: 1, InstanceID: "ia", RenewedMs: 1000})
	if err != nil || h1.Generation != 1 {
		t.Fatalf("create: %+v %v", h1, err)
	}
	if _, err := m.WriteHeartbeat(ctx, nil, rsm.Heartbeat{BrokerID: 1, InstanceID: "ia", RenewedMs: 1000}); !errors.Is(err, rsm.ErrPreconditionFailed) {
		t.Fatalf("second create: %v", err)
	}
	tp := remotelog.TopicPartition{Topic: "orders", Partition: 0}
	if _, err := m.CreateLease(ctx, tp, rsm.Owner{BrokerID: 1, InstanceID: "ia", RenewedMs: 1000, Heartbeat: rsm.HeartbeatKey(1, "ia")}); err != nil {
		t.Fatal(err)
	}
	h2, err := m.WriteHeartbeat(ctx, &h1, rsm.Heartbeat{BrokerID: 1, InstanceID: "ia", RenewedMs: 50_000})
	if err != nil || h2.Generation != 2 {
		t.Fatalf("renew: %+v %v", h2, err)
	}
	if _, err := m.WriteHeartbeat(ctx, &h1, rsm.Heartbeat{BrokerID: 1, InstanceID: "ia", RenewedMs: 60_000}); !errors.Is(err, rsm.ErrPreconditionFailed) {
		t.Fatalf("replace of a stale version: %v", err)
	}
	l, _, err := m.ReadLease(ctx, tp)
	if err != nil || l.HeartbeatMs != 50_000 || l.RenewedAtMs() != 50_000 {
		t.Fatalf("lease %+v %v", l, err)
	}
	if l.Free(100_000, lease) || !l.Free(110_000, lease) {
		t.Fatalf("lease renewed by its heartbeat at 50s: free at 100s %v, at 110s %v", l.Free(100_000, lease), l.Free(110_000, lease))
	}
	rel := h2.Heartbeat
	rel.Released = true
	if _, err := m.WriteHeartbeat(ctx, &h2, rel); err != nil {
		t.Fatal(err)
	}
	if l, _, _ = m.ReadLease(ctx, tp); !l.HeartbeatReleased || !l.Free(50_001, lease) {
		t.Fatalf("lease after its heartbeat was released: %+v", l)
	}
	// A lease naming a heartbeat that is gone counts by itself.
	if _, err := m.CreateLease(ctx, remotelog.TopicPartition{Topic: "orders", Partition: 1}, rsm.Owner{BrokerID: 2, InstanceID: "ib", RenewedMs: 1000, Heartbeat: rsm.HeartbeatKey(2, "ib")}); err != nil {
		t.Fatal(err)
	}
	if l, _, _ = m.ReadLease(ctx, remotelog.TopicPartition{Topic: "orders", Partition: 1}); l.Free(60_000, lease) || !l.Free(61_000, lease) {
		t.Fatalf("lease without its heartbeat: %+v", l)
	}
}

func TestIsHeartbeatKey(t *testing.T) {
	for key, want := range map[string]bool{
		"tierd/_instances/1-ia.json": true, "_instances/1-ia.json": true, "a/b/_instances/0-x.json": true,
		"tierd/orders-0/_owner.json": false, "tierd/_instances-0/00000000000000000000-x.log": false, "tierd/_instances/x.tmp": false,
	} {
		if got := rsm.IsHeartbeatKey(key); got != want {
			t.Errorf("IsHeartbeatKey(%q) = %v", key, got)
		}
	}
}
