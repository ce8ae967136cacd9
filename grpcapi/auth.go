package grpcapi

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"unicode"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/tierd/tierd/internal/kafkaacl"
)

// Anonymous is the principal of a caller that presents neither a token
// nor a client certificate: Kafka's KafkaPrincipal.ANONYMOUS.
const Anonymous = kafkaacl.Anonymous

// Authorizer decides a request by Kafka's ACL rules (authz.Authorizer).
type Authorizer interface {
	Authorize(kafkaacl.Request) kafkaacl.Decision
}

// Tokens maps a bearer token to the principal it stands for
// ("User:alice"); ok is false for a token it does not know.
type Tokens interface {
	Principal(token string) (principal string, ok bool)
}

// Auth says who calls the gRPC API and what they may do (docs/security.md).
//
// A caller on TCP is the principal of its bearer token (gRPC metadata
// "authorization: Bearer <token>") when it sends one, else "User:" and
// the subject of its verified client certificate mapped by Mapping (mtls),
// else Anonymous. A caller on the admin socket (ServeLocal) is the local
// user the kernel names (SO_PEERCRED) and may do everything: only tierd's
// user can open the socket.
//
// RemoteFetch: Fetch and FetchStream need READ on the topic, ListOffsets
// and ListSegments DESCRIBE (Kafka's rules for Fetch and ListOffsets),
// when an Authorizer is set; without one every caller reads. Admin is
// served on TCP only when callers can authenticate (Tokens, or a server
// TLS config that requires client certificates); there an anonymous
// caller is refused (Unauthenticated), Identity is open to every
// authenticated caller, and the rest to AdminPrincipals or, with an
// Authorizer, by Kafka's operations on the topic: DELETE for DeleteTopic
// (as Kafka's DeleteTopics), ALTER for RestorePartition, DESCRIBE for
// ListDeletions, PartitionStatus, and to see a partition in
// ListPartitions or an entry in Journal; ConsumerGroups by DESCRIBE on
// each group (Kafka's GROUP resource) and on the topics of its offsets.
type Auth struct {
	Tokens          Tokens                  // nil: no tokens are taken
	Mapping         kafkaacl.PrincipalRules // ssl.principal.mapping.rules; nil: DEFAULT
	Authorizer      Authorizer              // nil: reads are not checked; Admin only for AdminPrincipals
	AdminPrincipals []string                // may use every Admin method
}

// WithAuth sets who may call the gRPC API (default: Auth{}: every caller
// reads, Admin only on the admin socket).
func WithAuth(a Auth) Option { return func(s *Server) { s.auth = a } }

// Caller is who makes a call, as the server identified them.
type Caller struct {
	Principal string // "User:alice"; Anonymous when unauthenticated
	Host      string // the client's address as Kafka's ACLs compare it; "" on the admin socket
	Local     bool   // on the admin socket (or in process): tierd's own user
	UID       int    // the local caller's uid; -1 when unknown
}

// String names the caller for the journal and logs: the principal, and
// where the call came from.
//
// A principal with anything but printable characters other than '(' and
// ')' (a certificate's subject may hold them) is quoted, so that it
// cannot pass for the text around it.
func (c Caller) String() string {
	p := c.Principal
	if strings.ContainsAny(p, "()") || strings.ContainsFunc(p, func(r rune) bool { return !unicode.IsPrint(r) }) {
		p = strconv.Quote(p)
	}
	switch {
	case c.Local && c.UID >= 0:
		return fmt.Sprintf("%s (admin socket, uid %d)", p, c.UID)
	case c.Local:
		return p + " (local)"
	case c.Host != "":
		return p + " (host " + c.Host + ")"
	}
	return p
}

type callerKey struct{}

// WithCaller returns ctx carrying c, for an in-process Admin (NewAdmin)
// to record who runs a command.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the caller the server identified for ctx's call.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// identify names the caller of ctx's call: an error (Unauthenticated)
// for a token the server does not know or does not take, or a
// certificate no mapping rule applies to.
func (s *Server) identify(ctx context.Context) (Caller, error) {
	c := Caller{Principal: Anonymous, UID: -1}
	p, _ := peer.FromContext(ctx)
	if p != nil {
		if la, ok := p.AuthInfo.(localAuth); ok {
			return Caller{Principal: la.principal, Local: true, UID: la.uid}, nil
		}
		c.Host = hostOf(p.Addr)
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 && len(ti.State.PeerCertificates) > 0 {
			dn := ti.State.PeerCertificates[0].Subject.String()
			name, ok := s.auth.Mapping.Name(dn)
			if s.auth.Mapping == nil {
				name, ok = dn, true
			}
			if !ok {
				return c, status.Errorf(codes.Unauthenticated, "no ssl.principal.mapping.rules rule applies to the client certificate's subject %q", dn)
			}
			c.Principal = "User:" + name
		}
	}
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) == 0 {
		return c, nil
	}
	if len(vals) > 1 {
		return c, status.Error(codes.Unauthenticated, "more than one authorization header")
	}
	tok, ok := strings.CutPrefix(vals[0], "Bearer ")
	if !ok {
		return c, status.Error(codes.Unauthenticated, `the authorization header is not "Bearer <token>"`)
	}
	if s.auth.Tokens == nil {
		return c, status.Error(codes.Unauthenticated, "this endpoint takes no tokens (fetch.tokens_file is not set)")
	}
	who, ok := s.auth.Tokens.Principal(strings.TrimSpace(tok))
	if !ok {
		return c, status.Error(codes.Unauthenticated, "the token is not one of fetch.tokens_file's")
	}
	c.Principal = who
	return c, nil
}

// hostOf is a peer address as Kafka's ACLs compare hosts.
func hostOf(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(ta.IP); ok {
			return kafkaacl.HostString(ip.WithZone(ta.Zone))
		}
	}
	return ""
}

// adminOnTCP reports whether the Admin service is served on TCP: callers
// there can authenticate.
func (s *Server) adminOnTCP(tc *tls.Config) bool {
	return s.auth.Tokens != nil || (tc != nil && tc.ClientAuth == tls.RequireAndVerifyClientCert)
}

// allowed reports whether c may do op on topic by the Authorizer (every
// caller may when there is none).
func (s *Server) allowed(c Caller, op kafkaacl.Operation, topic string) bool {
	return s.allowedOn(c, kafkaacl.ResourceTopic, op, topic)
}

// allowedOn reports whether c may do op on the resource of type rt named
// name, logging a denial; a local caller, or a server without an
// Authorizer, may.
func (s *Server) allowedOn(c Caller, rt kafkaacl.ResourceType, op kafkaacl.Operation, name string) bool {
	if c.Local || s.auth.Authorizer == nil {
		return true
	}
	d := s.auth.Authorizer.Authorize(kafkaacl.Request{Principal: c.Principal, Host: c.Host, Operation: op, ResourceType: rt, ResourceName: name})
	if !d.Allowed {
		s.log.Info("gRPC call denied", "principal", c.Principal, "host", c.Host, "operation", op.String(), strings.ToLower(rt.String()), name, "rule", d.Rule)
	}
	return d.Allowed
}

// readOps are the operations the RemoteFetch methods need on the
// request's topic.
var readOps = map[string]kafkaacl.Operation{
	"Fetch": kafkaacl.OpRead, "FetchStream": kafkaacl.OpRead,
	"ListOffsets": kafkaacl.OpDescribe, "ListSegments": kafkaacl.OpDescribe,
}

// topicRequest is a request naming one topic.
type topicRequest interface{ GetTopic() string }

// checkRead authorizes a RemoteFetch call of method on req.
func (s *Server) checkRead(c Caller, method string, req any) error {
	op, ok := readOps[method]
	if !ok {
		return nil
	}
	tr, ok := req.(topicRequest)
	if !ok {
		return status.Errorf(codes.Internal, "fetch: %s request names no topic", method)
	}
	if !s.allowed(c, op, tr.GetTopic()) {
		return status.Errorf(codes.PermissionDenied, "%s may not %s topic %q", c.Principal, op, tr.GetTopic())
	}
	return nil
}

// methodName is the last element of a gRPC full method name.
func methodName(full string) (service, method string) {
	full = strings.TrimPrefix(full, "/")
	service, method, _ = strings.Cut(full, "/")
	return service, method
}

// unaryAuth identifies every unary call's caller, puts it in the
// context, and authorizes RemoteFetch reads.
func (s *Server) unaryAuth(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	c, err := s.identify(ctx)
	if err != nil {
		return nil, err
	}
	ctx = WithCaller(ctx, c)
	if svc, m := methodName(info.FullMethod); svc == remoteFetchService {
		if err := s.checkRead(c, m, req); err != nil {
			s.reqs.WithLabelValues(m, status.Code(err).String()).Inc()
			return nil, err
		}
	}
	return h(ctx, req)
}

// streamAuth does unaryAuth's work for streams: the request of a
// server stream is authorized when the handler receives it.
func (s *Server) streamAuth(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	c, err := s.identify(ss.Context())
	if err != nil {
		return err
	}
	svc, m := methodName(info.FullMethod)
	w := &authStream{ServerStream: ss, ctx: WithCaller(ss.Context(), c)}
	if svc == remoteFetchService {
		w.check = func(req any) error {
			if err := s.checkRead(c, m, req); err != nil {
				s.reqs.WithLabelValues(m, status.Code(err).String()).Inc()
				return err
			}
			return nil
		}
	}
	return h(srv, w)
}

const remoteFetchService = "tierd.v1.RemoteFetch"

// authStream carries the caller and checks each received request.
type authStream struct {
	grpc.ServerStream
	ctx   context.Context
	check func(req any) error
}

func (a *authStream) Context() context.Context { return a.ctx }

func (a *authStream) RecvMsg(m any) error {
	if err := a.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if a.check != nil {
		return a.check(m)
	}
	return nil
}
