package rsm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/tierd/tierd/internal/remotelog"
)

// Owner is the ownership lease of a partition, stored as
// "<prefix>/<topic>-<partition>/_owner.json": which tierd (broker id and
// instance id) copies and deletes the partition's segments, and when it
// last renewed the lease. Leases written before instance ids existed have
// only brokerId and renewedMs; they read with InstanceID "" and
// Generation 0.
type Owner struct {
	BrokerID int32 `json:"brokerId"`
	// InstanceID is the holder's instance id (kept in its metadata dir),
	// which tells apart two tierds given the same broker id.
	InstanceID string `json:"instanceId,omitempty"`
	// RenewedMs is when the holder last wrote the lease, ms since the
	// epoch by its clock.
	RenewedMs int64 `json:"renewedMs"`
	// Generation counts the writes of this lease object; the Manager sets
	// it, so that every write stores new bytes (and gets a new version).
	Generation int64 `json:"generation,omitempty"`
	// Released is set when the holder gave the lease up (on shutdown):
	// any tierd may take it at once.
	Released bool `json:"released,omitempty"`
	// Reconcile is set by a tierd that took the lease over from another
	// one, until it has brought its rows in line with the bucket: a tierd
	// that finds its own lease with it set (after a crash) reconciles
	// before acting.
	Reconcile bool `json:"reconcile,omitempty"`
	// Heartbeat is the key, relative to the prefix, of the holder's
	// instance heartbeat ("_instances/<brokerId>-<instanceId>.json", see
	// HeartbeatKey): when set, the holder keeps the lease by renewing
	// that one object instead of this one, and the lease lasts while
	// either was renewed within the ownership lease and neither is
	// released. Absent in leases renewed one by one (older tierds).
	Heartbeat string `json:"heartbeat,omitempty"`
}

// Heartbeat is an instance heartbeat, stored as
// "<prefix>/_instances/<brokerId>-<instanceId>.json": one object per
// tierd instance that its holder renews once per third of the ownership
// lease, keeping every partition lease that names it (Owner.Heartbeat)
// alive at the cost of one request per renewal, however many partitions
// it holds.
type Heartbeat struct {
	BrokerID   int32  `json:"brokerId"`
	InstanceID string `json:"instanceId"`
	// RenewedMs is when the instance last wrote it, ms since the epoch
	// by its clock.
	RenewedMs int64 `json:"renewedMs"`
	// Generation counts the writes of the object (set by the Manager).
	Generation int64 `json:"generation,omitempty"`
	// Released is set when the instance gave up every lease that names
	// this heartbeat (on shutdown): any tierd may take them at once.
	Released bool `json:"released,omitempty"`
}

// HeartbeatVersioned is a heartbeat as read or written, with the version
// a conditional replace must name.
type HeartbeatVersioned struct {
	Heartbeat
	Version Version
}

// Lease is a lease object as read or written, with the version a
// conditional replace must name. ReadLease also fills in the holder's
// heartbeat, when the lease names one.
type Lease struct {
	Owner
	Version Version
	// HeartbeatMs is the RenewedMs of the heartbeat the lease names, 0
	// when it names none or the object is missing.
	HeartbeatMs int64
	// HeartbeatReleased: the heartbeat the lease names is released.
	HeartbeatReleased bool
}

// RenewedAtMs returns when the holder last showed it holds the lease, ms:
// the later of the lease's own renewal and its heartbeat's.
func (l Lease) RenewedAtMs() int64 { return max(l.RenewedMs, l.HeartbeatMs) }

// Free reports whether another tierd may take the lease at nowMs: it was
// released (itself or through its heartbeat), or neither it nor its
// heartbeat was renewed within leaseMs.
func (l Lease) Free(nowMs, leaseMs int64) bool {
	return l.Released || l.HeartbeatReleased || nowMs-l.RenewedAtMs() >= leaseMs
}

// HeartbeatsDir is the directory, under the prefix, of the instance
// heartbeats.
const HeartbeatsDir = "_instances"

// HeartbeatKey returns the key, relative to the prefix, of an instance's
// heartbeat: "_instances/<brokerId>-<instanceId>.json". It is what
// Owner.Heartbeat holds.
func HeartbeatKey(brokerID int32, instanceID string) string {
	return fmt.Sprintf("%s/%d-%s.json", HeartbeatsDir, brokerID, instanceID)
}

// IsHeartbeatKey reports whether key (under any prefix) names an
// instance heartbeat: "[<prefix>/]_instances/<name>.json".
func IsHeartbeatKey(key string) bool {
	dir, name := path.Split(key)
	return path.Base(path.Clean(dir)) == HeartbeatsDir && strings.HasSuffix(name, ".json")
}

func (m *Manager) prefixed(rel string) string { return path.Join(m.cfg.Prefix, rel) }

// OwnerObject is the name of the ownership lease object in a partition prefix.
const OwnerObject = "_owner.json"

func (m *Manager) leaseKey(tp remotelog.TopicPartition) string {
	return m.PartitionPrefix(tp) + OwnerObject
}

// ReadLease returns a partition's lease and its version, and false when
// there is none. Errors: ErrBadManifest (wrapped) for an unreadable lease
// object, transport errors.
func (m *Manager) ReadLease(ctx context.Context, tp remotelog.TopicPartition) (Lease, bool, error) {
	data, v, err := m.b.ReadVersioned(ctx, m.leaseKey(tp))
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return Lease{}, false, nil
		}
		return Lease{}, false, err
	}
	l := Lease{Version: v}
	if err := json.Unmarshal(data, &l.Owner); err != nil {
		return Lease{}, false, fmt.Errorf("%w: %s: %v", ErrBadManifest, m.leaseKey(tp), err)
	}
	if l.Heartbeat != "" {
		hb, ok, err := m.readHeartbeat(ctx, l.Heartbeat)
		if err != nil {
			return Lease{}, false, err
		}
		if ok {
			l.HeartbeatMs, l.HeartbeatReleased = hb.RenewedMs, hb.Released
		}
	}
	return l, true, nil
}

// ReadHeartbeat returns an instance's heartbeat and its version, and
// false when there is none. Errors: ErrBadManifest (wrapped) for an
// unreadable object, transport errors.
func (m *Manager) ReadHeartbeat(ctx context.Context, brokerID int32, instanceID string) (HeartbeatVersioned, bool, error) {
	return m.readHeartbeat(ctx, HeartbeatKey(brokerID, instanceID))
}

func (m *Manager) readHeartbeat(ctx context.Context, rel string) (HeartbeatVersioned, bool, error) {
	if strings.HasPrefix(rel, "/") || strings.Contains(rel, "..") {
		return HeartbeatVersioned{}, false, fmt.Errorf("%w: heartbeat key %q", ErrBadManifest, rel)
	}
	key := m.prefixed(rel)
	data, v, err := m.b.ReadVersioned(ctx, key)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return HeartbeatVersioned{}, false, nil
		}
		return HeartbeatVersioned{}, false, err
	}
	h := HeartbeatVersioned{Version: v}
	if err := json.Unmarshal(data, &h.Heartbeat); err != nil {
		return HeartbeatVersioned{}, false, fmt.Errorf("%w: %s: %v", ErrBadManifest, key, err)
	}
	return h, true, nil
}

// WriteHeartbeat writes h as its instance's heartbeat: created when prev
// is nil and none exists ("If-None-Match: *"), else in place of prev only
// when the object is still at prev's version ("If-Match"), with the
// generation after prev's. It returns what it wrote. Errors:
// ErrPreconditionFailed (wrapped) when another write came first,
// transport errors.
func (m *Manager) WriteHeartbeat(ctx context.Context, prev *HeartbeatVersioned, h Heartbeat) (HeartbeatVersioned, error) {
	key := m.prefixed(HeartbeatKey(h.BrokerID, h.InstanceID))
	h.Generation = 1
	if prev != nil {
		h.Generation = prev.Generation + 1
	}
	data, err := json.Marshal(h)
	if err != nil {
		return HeartbeatVersioned{}, err
	}
	var v Version
	if prev == nil {
		v, err = m.b.PutIfAbsent(ctx, key, data)
	} else {
		v, err = m.b.PutIfMatch(ctx, key, data, prev.Version)
	}
	if err != nil {
		return HeartbeatVersioned{}, fmt.Errorf("write heartbeat %s: %w", key, err)
	}
	return HeartbeatVersioned{Heartbeat: h, Version: v}, nil
}

// CreateLease writes o as a partition's lease when it has none (S3's
// "If-None-Match: *"), with Generation 1, and returns what it wrote.
// Errors: ErrPreconditionFailed (wrapped) when a lease object exists,
// transport errors.
func (m *Manager) CreateLease(ctx context.Context, tp remotelog.TopicPartition, o Owner) (Lease, error) {
	o.Generation = 1
	data, err := json.Marshal(o)
	if err != nil {
		return Lease{}, err
	}
	v, err := m.b.PutIfAbsent(ctx, m.leaseKey(tp), data)
	if err != nil {
		return Lease{}, fmt.Errorf("create lease %s: %w", m.leaseKey(tp), err)
	}
	return Lease{Owner: o, Version: v}, nil
}

// ReplaceLease writes o as a partition's lease in place of prev, only
// when the lease object is still at prev's version (S3's "If-Match"),
// with the generation after prev's, and returns what it wrote. Errors:
// ErrPreconditionFailed (wrapped) when another write came first,
// transport errors.
func (m *Manager) ReplaceLease(ctx context.Context, tp remotelog.TopicPartition, prev Lease, o Owner) (Lease, error) {
	o.Generation = prev.Generation + 1
	data, err := json.Marshal(o)
	if err != nil {
		return Lease{}, err
	}
	v, err := m.b.PutIfMatch(ctx, m.leaseKey(tp), data, prev.Version)
	if err != nil {
		return Lease{}, fmt.Errorf("replace lease %s: %w", m.leaseKey(tp), err)
	}
	return Lease{Owner: o, Version: v}, nil
}

// ReleaseLease gives up a lease this tierd wrote as held: it is replaced,
// only when still at held's version, by the same owner marked Released at
// nowMs, so that another tierd can take it at once. The object is not
// deleted: a delete cannot be made conditional on every store. Errors as
// ReplaceLease.
func (m *Manager) ReleaseLease(ctx context.Context, tp remotelog.TopicPartition, held Lease, nowMs int64) (Lease, error) {
	o := held.Owner
	o.Released, o.RenewedMs = true, nowMs
	return m.ReplaceLease(ctx, tp, held, o)
}
