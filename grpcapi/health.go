package grpcapi

import (
	"context"
	"crypto/tls"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/tierd/tierd/proto/tierdpb"
)

// healthPollInterval is how often the health service asks the readiness
// function, so Watch streams see a change within about this long. Check
// asks it on every call.
const healthPollInterval = time.Second

// WithReadiness makes the standard health service (grpc.health.v1.Health)
// follow ready: SERVING while it returns true, NOT_SERVING (and the
// reason logged) while it returns false. The overall status ("") and the
// tierd.v1.RemoteFetch and tierd.v1.Admin services all follow it. Without
// it the server is SERVING while it serves.
func WithReadiness(ready func() (ok bool, why string)) Option {
	return func(s *Server) { s.ready = ready }
}

// WithTLS serves over TLS with c (a server config: a certificate, and
// client authentication for mutual TLS). Without it the server is
// plaintext. c may take its certificate from GetCertificate or
// GetConfigForClient, so a certificate can be replaced while serving.
func WithTLS(c *tls.Config) Option { return func(s *Server) { s.tls = c } }

// Configure applies options after NewServer and before Run or Serve:
// tierd run gives the health service its readiness, and the server its
// TLS, once the rest of the daemon is wired. Options that act inside
// NewServer (WithRegisterer, WithEngine, WithLogger's logger for the
// engine) have no effect here.
func (s *Server) Configure(opts ...Option) {
	for _, o := range opts {
		o(s)
	}
}

// healthServer is grpc's health server with its status refreshed from a
// readiness function before every Check and List, and every
// healthPollInterval for Watch streams.
type healthServer struct {
	*health.Server
	ready    func() (bool, string)
	log      *slog.Logger
	services []string

	mu      sync.Mutex // guards last, lastWhy: the status last logged
	last    healthpb.HealthCheckResponse_ServingStatus
	lastWhy string
}

func newHealthServer(ready func() (bool, string), log *slog.Logger, services []string) *healthServer {
	if ready == nil {
		ready = func() (bool, string) { return true, "" }
	}
	h := &healthServer{Server: health.NewServer(), ready: ready, log: log, services: append([]string{""}, services...)}
	h.refresh()
	return h
}

// refresh sets every service's status from the readiness function and
// logs a change.
func (h *healthServer) refresh() {
	ok, why := h.ready()
	st := healthpb.HealthCheckResponse_SERVING
	if !ok {
		st = healthpb.HealthCheckResponse_NOT_SERVING
	}
	for _, svc := range h.services {
		h.SetServingStatus(svc, st) // a no-op after Shutdown
	}
	h.note(st, why)
}

// note logs a status change.
func (h *healthServer) note(st healthpb.HealthCheckResponse_ServingStatus, why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if st == h.last && why == h.lastWhy {
		return
	}
	h.last, h.lastWhy = st, why
	if st == healthpb.HealthCheckResponse_SERVING {
		h.log.Info("health: SERVING")
	} else {
		h.log.Info("health: NOT_SERVING", "reason", why)
	}
}

// Check implements grpc.health.v1.Health with a fresh status.
func (h *healthServer) Check(ctx context.Context, in *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.refresh()
	return h.Server.Check(ctx, in)
}

// List implements grpc.health.v1.Health with fresh statuses.
func (h *healthServer) List(ctx context.Context, in *healthpb.HealthListRequest) (*healthpb.HealthListResponse, error) {
	h.refresh()
	return h.Server.List(ctx, in)
}

// poll refreshes the status until ctx ends.
func (h *healthServer) poll(ctx context.Context) {
	t := time.NewTicker(healthPollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.refresh()
		}
	}
}

// newGRPCServer builds the gRPC server with tierd's services, the health
// service and server reflection (so grpcurl and similar tools list and
// call the API without the .proto files): over TLS when configured, or,
// local, for the admin socket. Every call's caller is identified and
// authorized (auth.go). The Admin service is served on the admin socket,
// and on TCP only where callers can authenticate.
func (s *Server) newGRPCServer(local bool) (*grpc.Server, *healthServer) {
	opts := append(ServerOptions(), grpc.ChainUnaryInterceptor(s.unaryAuth), grpc.ChainStreamInterceptor(s.streamAuth))
	switch {
	case local:
		opts = append(opts, grpc.Creds(localCreds{}))
	case s.tls != nil:
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.tls)))
	}
	gs := grpc.NewServer(opts...)
	gs.RegisterService(remoteFetchDesc(), s) // Fetch without a records copy (stream.go)
	services := []string{tierdpb.RemoteFetch_ServiceDesc.ServiceName}
	if s.admin != nil && (local || s.adminOnTCP(s.tls)) {
		tierdpb.RegisterAdminServer(gs, &adminEdge{a: s.admin, s: s})
		services = append(services, tierdpb.Admin_ServiceDesc.ServiceName)
	}
	hs := newHealthServer(s.ready, s.log, services)
	healthpb.RegisterHealthServer(gs, hs)
	reflection.Register(gs)
	return gs, hs
}
