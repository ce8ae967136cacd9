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
