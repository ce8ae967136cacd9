package cluster

import (
	"log/slog"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const testClusterID = "tierd-test-cluster"

// newCluster starts an in-process kfake cluster of three brokers on
// loopback ports, closed when the test ends.
func newCluster(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	opts = append([]kfake.Opt{kfake.NumBrokers(3), kfake.ClusterID(testClusterID)}, opts...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("start kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// testConfig is a Config for the cluster c; mod may change it.
func testConfig(c *kfake.Cluster, mod func(*Config)) Config {
	cfg := DefaultConfig()
	cfg.BootstrapServers = c.ListenAddrs()
	cfg.RequestTimeout = 5 * time.Second
	if mod != nil {
		mod(&cfg)
	}
	return cfg
}

// newClient returns a Client for cfg, closed when the test ends.
func newClient(t *testing.T, cfg Config) *Client {
	t.Helper()
	cl, err := New(cfg, WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// newAdmin returns a kadm client for c, as an operator's tool would use.
func newAdmin(t *testing.T, c *kfake.Cluster, opts ...kgo.Opt) *kadm.Client {
	t.Helper()
	adm, err := kadm.NewOptClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, opts...)...)
	if err != nil {
		t.Fatalf("kadm: %v", err)
	}
	t.Cleanup(adm.Close)
	return adm
}

// createTopic creates a topic through kadm and returns its id as the
// CreateTopics answer gave it.
func createTopic(t *testing.T, adm *kadm.Client, name string, partitions int32) string {
	t.Helper()
	r, err := adm.CreateTopic(t.Context(), partitions, 3, nil, name)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	return FormatTopicID(r.ID)
}

// deleteTopic deletes a topic through kadm.
func deleteTopic(t *testing.T, adm *kadm.Client, name string) {
	t.Helper()
	r, err := adm.DeleteTopic(t.Context(), name)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		t.Fatalf("delete topic %s: %v", name, err)
	}
}

// brokersOf lists c's brokers as a Metadata answer does, for injected
// answers.
func brokersOf(t *testing.T, c *kfake.Cluster) []kmsg.MetadataResponseBroker {
	t.Helper()
	var out []kmsg.MetadataResponseBroker
	for i, a := range c.ListenAddrs() {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := strconv.Atoi(port)
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = int32(i), host, int32(p)
		out = append(out, b)
	}
	return out
}

// asksFor reports whether a Metadata request names the topic id id.
func asksFor(req kmsg.Request, id string) bool {
	m, ok := req.(*kmsg.MetadataRequest)
	if !ok {
		return false
	}
	for _, rt := range m.Topics {
		if FormatTopicID(rt.TopicID) == id {
			return true
		}
	}
	return false
}

// within runs fn and fails the test when it has not returned after
// limit, a bound far above the request timeouts used, so only a hang
// trips it.
func within(t *testing.T, limit time.Duration, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("still running after %s: the request timeout did not bound the call", limit)
	}
}
