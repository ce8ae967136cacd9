package cluster

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// wantState fails the test unless res[id] has the state st and its proof
// holds every one of words.
func wantState(t *testing.T, res map[string]IDStatus, id string, st IDState, words ...string) {
	t.Helper()
	got, ok := res[id]
	if !ok {
		t.Fatalf("id %s missing from %v", id, res)
	}
	if got.State != st {
		t.Errorf("id %s: %s (%s), want %s", id, got.State, got.Proof, st)
	}
	for _, w := range words {
		if !strings.Contains(got.Proof, w) {
			t.Errorf("id %s: proof %q lacks %q", id, got.Proof, w)
		}
	}
}

func TestTopicIDsDeletedTopicIsGone(t *testing.T) {
	c := newCluster(t)
	adm := newAdmin(t, c)
	id := createTopic(t, adm, "orders", 2)
	cl := newClient(t, testConfig(c, nil))

	cid, res, err := cl.TopicIDs(t.Context(), []string{id})
	if err != nil || cid != testClusterID {
		t.Fatalf("TopicIDs: cluster %q err %v", cid, err)
	}
	wantState(t, res, id, IDExists, `"orders"`)
	if res[id].Name != "orders" {
		t.Errorf("name %q, want orders", res[id].Name)
	}

	deleteTopic(t, adm, "orders")
	cid, res, err = cl.TopicIDs(t.Context(), []string{id})
	if err != nil || cid != testClusterID {
		t.Fatalf("TopicIDs after delete: cluster %q err %v", cid, err)
	}
	wantState(t, res, id, IDGone, "UNKNOWN_TOPIC_ID", "error code 100", "Metadata v13 by topic id", "broker ", testClusterID, id)
	if res[id].Name != "" {
		t.Errorf("a gone id has name %q", res[id].Name)
	}
}

func TestTopicIDsRecreatedTopic(t *testing.T) {
	c := newCluster(t)
	adm := newAdmin(t, c)
	oldID := createTopic(t, adm, "events", 1)
	deleteTopic(t, adm, "events")
	newID := createTopic(t, adm, "events", 1)
	if oldID == newID {
		t.Fatalf("re-created topic kept its id %s", oldID)
	}
	cl := newClient(t, testConfig(c, nil))

	_, res, err := cl.TopicIDs(t.Context(), []string{oldID, newID, oldID})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 {
		t.Errorf("%d answers for 2 distinct ids: %v", len(res), res)
	}
	wantState(t, res, oldID, IDGone, "UNKNOWN_TOPIC_ID")
	wantState(t, res, newID, IDExists)
	if res[newID].Name != "events" {
		t.Errorf("new id names %q", res[newID].Name)
	}
	v, err := cl.Describe(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if v.ByID[newID] != "events" || v.ByID[oldID] != "" {
		t.Errorf("ByID %v: want only the new id", v.ByID)
	}
}

// kfake answers several unknown ids of one request with one entry; each
// must still be classified (the lone ones are asked again).
func TestTopicIDsSeveralGone(t *testing.T) {
	c := newCluster(t)
	adm := newAdmin(t, c)
	var ids []string
	for i := range 3 {
		name := fmt.Sprintf("t%d", i)
		ids = append(ids, createTopic(t, adm, name, 1))
		deleteTopic(t, adm, name)
	}
	live := createTopic(t, adm, "live", 1)
	cl := newClient(t, testConfig(c, nil))

	_, res, err := cl.TopicIDs(t.Context(), append(ids, live))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		wantState(t, res, id, IDGone, "UNKNOWN_TOPIC_ID", id)
	}
	wantState(t, res, live, IDExists)
}

// A principal that may not DESCRIBE a topic does not see it in a listing
// and gets TOPIC_AUTHORIZATION_FAILED for its id: neither is proof. A
// deleted id is still UNKNOWN_TOPIC_ID, as Kafka checks ids before ACLs.
func TestTopicIDsUnauthorizedProvesNothing(t *testing.T) {
	c := newCluster(t, kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser("PLAIN", "admin", "admin-pw"),
		kfake.User("PLAIN", "tierd", "tierd-pw", kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: "visible",
			Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationDescribe, Allow: true}))
	adm := newAdmin(t, c, kgo.SASL(plain.Auth{User: "admin", Pass: "admin-pw"}.AsMechanism()))
	visible := createTopic(t, adm, "visible", 1)
	hidden := createTopic(t, adm, "hidden", 1)
	gone := createTopic(t, adm, "gone", 1)
	deleteTopic(t, adm, "gone")
	cl := newClient(t, testConfig(c, func(cfg *Config) {
		cfg.SASL = SASLConfig{Mechanism: "PLAIN", Username: "tierd", Password: "tierd-pw"}
	}))

	v, err := cl.Describe(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := v.Topics["hidden"]; ok || v.Topics["visible"].ID != visible {
		t.Fatalf("listing %v: want visible only", v.Topics)
	}
	_, res, err := cl.TopicIDs(t.Context(), []string{visible, hidden, gone})
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, res, visible, IDExists)
	wantState(t, res, hidden, IDUnknown, "TOPIC_AUTHORIZATION_FAILED", "proves nothing")
	wantState(t, res, gone, IDGone, "UNKNOWN_TOPIC_ID")
}

func TestTopicIDsTransportErrorProvesNothing(t *testing.T) {
	c := newCluster(t)
	adm := newAdmin(t, c)
	id := createTopic(t, adm, "orders", 1)
	deleteTopic(t, adm, "orders")
	cl := newClient(t, testConfig(c, func(cfg *Config) { cfg.RequestTimeout = 500 * time.Millisecond }))
	// Every Metadata request naming the id has its connection closed.
	c.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !asksFor(req, id) {
			return nil, nil, false
		}
		return nil, errors.New("injected connection loss"), true
	})
	var (
		res map[string]IDStatus
		err error
	)
	within(t, time.Minute, func() { _, res, err = cl.TopicIDs(t.Context(), []string{id}) })
	if err == nil || !strings.Contains(err.Error(), "Metadata") {
		t.Errorf("err %v, want the failed Metadata request", err)
	}
	wantState(t, res, id, IDUnknown, "no answer")
}

func TestTopicIDsClosedClusterProvesNothing(t *testing.T) {
	c := newCluster(t)
	id := createTopic(t, newAdmin(t, c), "orders", 1)
	cl := newClient(t, testConfig(c, func(cfg *Config) { cfg.RequestTimeout = 500 * time.Millisecond }))
	c.Close()
	var (
		res map[string]IDStatus
		err error
	)
	within(t, time.Minute, func() { _, res, err = cl.TopicIDs(t.Context(), []string{id}) })
	if err == nil {
		t.Error("no error from a closed cluster")
	}
	wantState(t, res, id, IDUnknown)
}

// Kafka takes topic ids in Metadata requests from v12 only; an answer at
// v11 proves nothing even when it says UNKNOWN_TOPIC_ID (kfake does).
func TestTopicIDsOldMetadataVersionProvesNothing(t *testing.T) {
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(int16(kmsg.Metadata), 11)
	c := newCluster(t, kfake.MaxVersions(vs))
	adm := newAdmin(t, c)
	id := createTopic(t, adm, "orders", 1)
	deleteTopic(t, adm, "orders")
	cl := newClient(t, testConfig(c, nil))

	_, res, err := cl.TopicIDs(t.Context(), []string{id})
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, res, id, IDUnknown, "Metadata v11", "only from Metadata v12")
}

func TestTopicIDsWrongClusterProvesNothing(t *testing.T) {
	c := newCluster(t)
	adm := newAdmin(t, c)
	id := createTopic(t, adm, "orders", 1)
	deleteTopic(t, adm, "orders")
	cl := newClient(t, testConfig(c, func(cfg *Config) { cfg.ClusterID = "prod-east" }))

	cid, res, err := cl.TopicIDs(t.Context(), []string{id})
	if !errors.Is(err, ErrClusterMismatch) || cid != testClusterID {
		t.Fatalf("cluster %q err %v, want ErrClusterMismatch and the answering cluster's id", cid, err)
	}
	wantState(t, res, id, IDUnknown, "prod-east", testClusterID)
}

// Answers a real broker does not give, injected: each must prove nothing.
func TestTopicIDsSuspectAnswersProveNothing(t *testing.T) {
	type answer func(*kmsg.MetadataResponse, [16]byte)
	gone := func(r *kmsg.MetadataResponse, raw [16]byte) {
		rt := kmsg.NewMetadataResponseTopic()
		rt.TopicID, rt.ErrorCode = raw, kerr.UnknownTopicID.Code
		r.Topics = append(r.Topics, rt)
	}
	for _, tc := range []struct {
		name    string
		edit    answer
		words   []string
		wantErr bool // kgo turns a top-level error into a request error
	}{
		{"no cluster id", func(r *kmsg.MetadataResponse, raw [16]byte) { gone(r, raw); r.ClusterID = nil }, []string{"no cluster id"}, false},
		{"no live brokers", func(r *kmsg.MetadataResponse, raw [16]byte) { gone(r, raw); r.Brokers = nil }, []string{"no live brokers"}, false},
		{"top-level error", func(r *kmsg.MetadataResponse, raw [16]byte) {
			gone(r, raw)
			r.ErrorCode = kerr.RebootstrapRequired.Code
		}, []string{"REBOOTSTRAP_REQUIRED"}, true},
		{"id left out", func(r *kmsg.MetadataResponse, raw [16]byte) { raw[0] ^= 0xff; gone(r, raw) }, []string{"not in the answer", "asked alone"}, false},
		{"conflicting entries", func(r *kmsg.MetadataResponse, raw [16]byte) {
			gone(r, raw)
			rt := kmsg.NewMetadataResponseTopic()
			rt.TopicID, rt.Topic = raw, kmsg.StringPtr("orders")
			r.Topics = append(r.Topics, rt)
		}, []string{"conflicting"}, false},
		{"no name", func(r *kmsg.MetadataResponse, raw [16]byte) {
			rt := kmsg.NewMetadataResponseTopic()
			rt.TopicID = raw
			r.Topics = append(r.Topics, rt)
		}, []string{"without a name"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			id := createTopic(t, newAdmin(t, c), "orders", 1)
			raw, _ := ParseTopicID(id)
			brokers := brokersOf(t, c)
			c.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				if !asksFor(req, id) {
					return nil, nil, false
				}
				r := req.ResponseKind().(*kmsg.MetadataResponse)
				r.ClusterID, r.ControllerID, r.Brokers = kmsg.StringPtr(testClusterID), 0, brokers
				tc.edit(r, raw)
				return r, nil, true
			})
			cl := newClient(t, testConfig(c, nil))
			_, res, err := cl.TopicIDs(t.Context(), []string{id})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want an error: %v", err, tc.wantErr)
			}
			wantState(t, res, id, IDUnknown, tc.words...)
		})
	}
}

func TestTopicIDsRefusesBadIDs(t *testing.T) {
	cl, err := New(Config{BootstrapServers: []string{"127.0.0.1:1"}, ClientID: "tierd", RequestTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	_, res, err := cl.TopicIDs(t.Context(), []string{"AAAAAAAAAAAAAAAAAAAAAA", "short", "gSnfpEbtQfSDpxM2lhEn9A"})
	if !errors.Is(err, ErrBadTopicID) || res != nil {
		t.Fatalf("res %v err %v, want ErrBadTopicID before any request", res, err)
	}
	for _, s := range []string{"AAAAAAAAAAAAAAAAAAAAAA", "short"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %q", err, s)
		}
	}
	_, res, err = cl.TopicIDs(t.Context(), nil)
	if err != nil || len(res) != 0 {
		t.Errorf("no ids: res %v err %v", res, err)
	}
}
