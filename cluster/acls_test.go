package cluster

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/tierd/tierd/internal/kafkaacl"
)

const scram256 = "SCRAM-SHA-256"

// aclCluster is a kfake cluster with SASL and ACLs: the super user
// "admin", and the users alice and bob, who may do only what ACLs allow.
func aclCluster(t *testing.T) *kfake.Cluster {
	return newCluster(t, kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser(scram256, "admin", "admin-pw"),
		kfake.User(scram256, "alice", "alice-pw"), kfake.User(scram256, "bob", "bob-pw"))
}

// kgoAs is a kgo client of c logged in as user.
func kgoAs(t *testing.T, c *kfake.Cluster, user, pw string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...),
		kgo.SASL(scram.Auth{User: user, Pass: pw}.AsSha256Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// clientAs is tierd's cluster Client logged in as user.
func clientAs(t *testing.T, c *kfake.Cluster, user, pw string) *Client {
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return newClient(t, testConfig(c, func(cfg *Config) {
		cfg.SASL = SASLConfig{Mechanism: scram256, Username: user, PasswordFile: pwFile}
	}))
}

// setACLs replaces every ACL of the cluster with acls, as the admin.
func setACLs(t *testing.T, admin *kgo.Client, acls []kafkaacl.ACL) {
	t.Helper()
	ctx := t.Context()
	del := kmsg.NewPtrDeleteACLsRequest()
	del.Filters = []kmsg.DeleteACLsRequestFilter{{ResourceType: kmsg.ACLResourceTypeAny, ResourcePatternType: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, PermissionType: kmsg.ACLPermissionTypeAny}}
	if resp, err := del.RequestWith(ctx, admin); err != nil || kerr.ErrorForCode(resp.Results[0].ErrorCode) != nil {
		t.Fatalf("delete ACLs: %v %+v", err, resp)
	}
	if len(acls) == 0 {
		return
	}
	cr := kmsg.NewPtrCreateACLsRequest()
	for _, a := range acls {
		cr.Creations = append(cr.Creations, kmsg.CreateACLsRequestCreation{
			ResourceType: kmsg.ACLResourceType(a.ResourceType), ResourceName: a.ResourceName,
			ResourcePatternType: kmsg.ACLResourcePatternType(a.PatternType), Principal: a.Principal, Host: a.Host,
			Operation: kmsg.ACLOperation(a.Operation), PermissionType: kmsg.ACLPermissionType(a.Permission)})
	}
	resp, err := cr.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range resp.Results {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			t.Fatalf("create %v: %v", acls[i], err)
		}
	}
}

func sorted(acls []kafkaacl.ACL) []kafkaacl.ACL {
	s, err := kafkaacl.NewSet(acls)
	if err != nil {
		panic(err)
	}
	out := s.ACLs()
	sort.SliceStable(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// TestACLs: the ACLs a super user reads back are those created, every
// field; a principal without DESCRIBE on the cluster is refused with
// Kafka's error.
func TestACLs(t *testing.T) {
	c := aclCluster(t)
	admin := kgoAs(t, c, "admin", "admin-pw")
	want := []kafkaacl.ACL{
		{ResourceType: kafkaacl.ResourceTopic, ResourceName: "orders", PatternType: kafkaacl.PatternLiteral,
			Principal: "User:alice", Host: "*", Operation: kafkaacl.OpRead, Permission: kafkaacl.Allow},
		{ResourceType: kafkaacl.ResourceTopic, ResourceName: "ord", PatternType: kafkaacl.PatternPrefixed,
			Principal: "User:*", Host: "10.0.0.9", Operation: kafkaacl.OpAll, Permission: kafkaacl.Deny},
		{ResourceType: kafkaacl.ResourceGroup, ResourceName: "billing", PatternType: kafkaacl.PatternLiteral,
			Principal: "User:bob", Host: "*", Operation: kafkaacl.OpDescribeConfigs, Permission: kafkaacl.Allow},
		{ResourceType: kafkaacl.ResourceCluster, ResourceName: kafkaacl.ClusterName, PatternType: kafkaacl.PatternLiteral,
			Principal: "User:bob", Host: "*", Operation: kafkaacl.OpDescribe, Permission: kafkaacl.Allow},
	}
	setACLs(t, admin, want)
	got, src, err := clientAs(t, c, "admin", "admin-pw").ACLs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if src == "" {
		t.Error("no source broker")
	}
	if g, w := sorted(got), sorted(want); !reflect.DeepEqual(g, w) {
		t.Fatalf("got\n%v\nwant\n%v", g, w)
	}
	// bob holds DESCRIBE on the cluster: he may list the ACLs; alice may not.
	if _, _, err := clientAs(t, c, "bob", "bob-pw").ACLs(t.Context()); err != nil {
		t.Errorf("bob, with DESCRIBE on the cluster: %v", err)
	}
	if _, _, err := clientAs(t, c, "alice", "alice-pw").ACLs(t.Context()); err == nil || !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("alice, without DESCRIBE on the cluster: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
}

// TestAuthorizerAgainstKfake: random ACL sets, decided by kafkaacl's
// Authorizer from the ACLs read back through Client.ACLs, against what
// the cluster (kfake, whose authorizer follows Kafka's rules with
// allow.everyone.if.no.acl.found false) itself answers alice: which
// topics Metadata shows her, and each shown topic's authorized
// operations (Metadata v8+, KIP-430), for every topic operation.
func TestAuthorizerAgainstKfake(t *testing.T) {
	c := aclCluster(t)
	admin := kgoAs(t, c, "admin", "admin-pw")
	topics := []string{"orders", "orders-eu", "ord", "logs-1", "logs-2", "billing"}
	ctx := t.Context()
	cr := kmsg.NewPtrCreateTopicsRequest()
	for _, name := range topics {
		cr.Topics = append(cr.Topics, kmsg.CreateTopicsRequestTopic{Topic: name, NumPartitions: 1, ReplicationFactor: 1})
	}
	if _, err := cr.RequestWith(ctx, admin); err != nil {
		t.Fatal(err)
	}
	alice := kgoAs(t, c, "alice", "alice-pw")
	reader := clientAs(t, c, "admin", "admin-pw")
	topicOps := []kafkaacl.Operation{kafkaacl.OpRead, kafkaacl.OpWrite, kafkaacl.OpCreate, kafkaacl.OpDelete,
		kafkaacl.OpAlter, kafkaacl.OpDescribe, kafkaacl.OpDescribeConfigs, kafkaacl.OpAlterConfigs}
	names := []struct {
		name string
		pt   kafkaacl.PatternType
	}{{"orders", kafkaacl.PatternLiteral}, {"ord", kafkaacl.PatternPrefixed}, {"ord", kafkaacl.PatternLiteral},
		{"orders-", kafkaacl.PatternPrefixed}, {"logs-", kafkaacl.PatternPrefixed}, {"*", kafkaacl.PatternLiteral},
		{"logs-2", kafkaacl.PatternLiteral}, {"billing", kafkaacl.PatternLiteral}, {"o", kafkaacl.PatternPrefixed}}
	ops := append([]kafkaacl.Operation{kafkaacl.OpAll}, topicOps...)
	principals := []string{"User:alice", "User:*", "User:bob"}
	hosts := []string{"*", "127.0.0.1", "10.0.0.9"}
	rng := rand.New(rand.NewPCG(1, 2))
	checked := map[bool]int{}
	for round := 0; round < 40; round++ {
		var acls []kafkaacl.ACL
		for i := 0; i < 1+rng.IntN(8); i++ {
			n := names[rng.IntN(len(names))]
			perm := kafkaacl.Allow
			if rng.IntN(4) == 0 {
				perm = kafkaacl.Deny
			}
			acls = append(acls, kafkaacl.ACL{ResourceType: kafkaacl.ResourceTopic, ResourceName: n.name, PatternType: n.pt,
				Principal: principals[rng.IntN(len(principals))], Host: hosts[rng.IntN(len(hosts))],
				Operation: ops[rng.IntN(len(ops))], Permission: perm})
		}
		setACLs(t, admin, acls)
		got, _, err := reader.ACLs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		set, err := kafkaacl.NewSet(got)
		if err != nil {
			t.Fatal(err)
		}
		z := kafkaacl.Authorizer{}
		req := kmsg.NewPtrMetadataRequest()
		for _, name := range topics {
			req.Topics = append(req.Topics, kmsg.MetadataRequestTopic{Topic: kmsg.StringPtr(name)})
		}
		req.IncludeTopicAuthorizedOperations = true
		resp, err := req.RequestWith(ctx, alice)
		if err != nil {
			t.Fatal(err)
		}
		for _, rt := range resp.Topics {
			name := *rt.Topic
			ask := func(op kafkaacl.Operation) bool {
				return z.Authorize(set, kafkaacl.Request{Principal: "User:alice", Host: "127.0.0.1", Operation: op,
					ResourceType: kafkaacl.ResourceTopic, ResourceName: name}).Allowed
			}
			shown := rt.ErrorCode == 0
			if rt.ErrorCode != 0 && rt.ErrorCode != kerr.TopicAuthorizationFailed.Code {
				t.Fatalf("round %d, %s: error %v", round, name, kerr.ErrorForCode(rt.ErrorCode))
			}
			if shown != ask(kafkaacl.OpDescribe) {
				t.Errorf("round %d, %s: the cluster shows it %v, kafkaacl allows DESCRIBE %v; ACLs %v", round, name, shown, !shown, got)
			}
			checked[shown]++
			if !shown {
				continue
			}
			for _, op := range topicOps {
				if inCluster := rt.AuthorizedOperations&(1<<int32(op)) != 0; inCluster != ask(op) {
					t.Errorf("round %d, %s %v: the cluster allows %v, kafkaacl %v; ACLs %v", round, name, op, inCluster, !inCluster, got)
				}
			}
		}
	}
	if checked[true] < 20 || checked[false] < 20 {
		t.Fatalf("too few of each answer to mean much: %v", checked)
	}
	t.Logf("topics shown %d times, hidden %d times", checked[true], checked[false])
}
