package listener

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tierd/tierd/internal/kafkaacl"
)

// Authorizer decides whether a client may do an operation on a resource,
// with Kafka's ACL rules (authz.Authorizer is one). Authorize must be
// safe for concurrent use and quick: it is asked for every topic of
// every request.
type Authorizer interface {
	Authorize(kafkaacl.Request) kafkaacl.Decision
}

// WithAuthorizer makes the listener authorize every request as a Kafka
// broker with an authorizer does (see doc.go, "Authorization"). Default
// none: every client may describe and read every topic served.
func WithAuthorizer(a Authorizer) Option { return func(s *Server) { s.authz = a } }

// Internal topics never served, whatever the ACLs: KRaft's metadata log
// (the cluster's configuration and SCRAM credential records). A broker
// serves it to no client.
const clusterMetadataTopic = "__cluster_metadata"

// Anonymous is the principal of a client that has not authenticated:
// Kafka's KafkaPrincipal.ANONYMOUS, on PLAINTEXT and on TLS without a
// client certificate.
const Anonymous = kafkaacl.Anonymous

// identify sets c's principal and client host, once its TLS handshake (if
// any) is done: a verified client certificate gives "User:" and its
// subject's distinguished name (RFC 2253, as Go prints it) mapped by
// ssl.principal.mapping.rules (Kafka's default SSL principal builder; a
// certificate no rule applies to closes the connection), anything else
// Anonymous; the host is
// the remote address as Kafka's ACLs compare it (kafkaacl.HostString).
func (c *conn) identify() *closeErr {
	c.principal = Anonymous
	if tc, ok := c.nc.(*tls.Conn); ok {
		if st := tc.ConnectionState(); len(st.VerifiedChains) > 0 && len(st.PeerCertificates) > 0 {
			dn := st.PeerCertificates[0].Subject.String()
			name, ok := c.s.mapping.Name(dn)
			if !ok {
				return &closeErr{reason: reasonTLS, err: fmt.Errorf("no ssl.principal.mapping.rules rule applies to the client certificate's subject %q", dn)}
			}
			c.principal = "User:" + name
		}
	}
	c.host = ""
	if ta, ok := c.nc.RemoteAddr().(*net.TCPAddr); ok {
		if a, ok := netip.AddrFromSlice(ta.IP); ok {
			c.host = kafkaacl.HostString(a.WithZone(ta.Zone))
		}
	} else if ap, err := netip.ParseAddrPort(c.nc.RemoteAddr().String()); err == nil {
		c.host = kafkaacl.HostString(ap.Addr())
	}
	return nil
}

// topicCode is the error code of an operation op of c on topic before
// anything else is looked at: UNKNOWN_TOPIC_OR_PARTITION for a topic never
// served (__cluster_metadata, as if it did not exist),
// TOPIC_AUTHORIZATION_FAILED when c may not do op on it, 0 when it may.
func (c *conn) topicCode(op kafkaacl.Operation, topic string) int16 {
	switch {
	case topic == clusterMetadataTopic:
		return kerr.UnknownTopicOrPartition.Code
	case !c.allowed(op, topic):
		return kerr.TopicAuthorizationFailed.Code
	}
	return 0
}

// allowed reports whether c may do op on topic. Without an Authorizer
// every client may (today's behaviour).
func (c *conn) allowed(op kafkaacl.Operation, topic string) bool {
	return c.authorized(kafkaacl.ResourceTopic, op, topic)
}

// authorized reports whether c may do op on the resource of type rt
// named name (a topic, a group). Without an Authorizer every client may.
// A denial is logged once per client and resource.
func (c *conn) authorized(rt kafkaacl.ResourceType, op kafkaacl.Operation, name string) bool {
	a := c.s.authz
	if a == nil {
		return true
	}
	d := a.Authorize(kafkaacl.Request{Principal: c.principal, Host: c.host, Operation: op, ResourceType: rt, ResourceName: name})
	if !d.Allowed && c.s.once.first("denied/"+rt.String()+"/"+op.String()+"/"+name, c.host, c.principal) {
		c.s.logger.Info("Kafka request denied (logged once per client and resource)", "principal", c.principal, "host", c.host,
			"operation", op.String(), strings.ToLower(rt.String()), name, "rule", d.Rule, "client_id", c.clientID)
	}
	return d.Allowed
}

// clusterAllowed reports whether c may do op on the cluster resource.
func (c *conn) clusterAllowed(op kafkaacl.Operation) bool {
	if c.s.authz == nil {
		return true
	}
	return c.s.authz.Authorize(kafkaacl.Request{Principal: c.principal, Host: c.host, Operation: op,
		ResourceType: kafkaacl.ResourceCluster, ResourceName: kafkaacl.ClusterName}).Allowed
}

// topicOps is Metadata's authorized operations of a topic for c (v8+,
// KIP-430): of what tierd serves, READ and DESCRIBE, as c may do them.
func (c *conn) topicOps(topic string) int32 {
	var ops int32
	if c.allowed(kafkaacl.OpRead, topic) {
		ops |= 1 << int32(kafkaacl.OpRead)
	}
	if c.allowed(kafkaacl.OpDescribe, topic) {
		ops |= 1 << int32(kafkaacl.OpDescribe)
	}
	return ops
}
