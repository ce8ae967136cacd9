package listener

import (
	"regexp"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// apiRange is one API the listener serves and its versions.
type apiRange struct {
	key      int16
	min, max int16
}

// served lists every API and version range the listener implements,
// exactly as ApiVersions advertises them (see doc.go for the semantics).
// A request for anything else closes the connection, as Kafka does for a
// request it cannot parse.
var served = []apiRange{
	{int16(kmsg.Produce), 3, 13},             // answered, never written (TOPIC_AUTHORIZATION_FAILED)
	{int16(kmsg.Fetch), 4, 16},               // v13+ by topic id
	{int16(kmsg.ListOffsets), 0, 9},          // v9: LATEST_TIERED (KIP-1005)
	{int16(kmsg.Metadata), 0, 12},            // v12: topics by id
	{int16(kmsg.ApiVersions), 0, 4},          // KIP-511 fallback for higher versions
	{int16(kmsg.OffsetForLeaderEpoch), 0, 4}, // KIP-320 truncation checks
}

// servedRange returns the served versions of key: served's, and the
// group APIs' when s serves groups.
func (s *Server) servedRange(key int16) (apiRange, bool) {
	if a, ok := lookupRange(served, key); ok {
		return a, true
	}
	if s.groups != nil || s.fwd != nil {
		return lookupRange(groupServed, key)
	}
	return apiRange{}, false
}

func lookupRange(list []apiRange, key int16) (apiRange, bool) {
	for _, a := range list {
		if a.key == key {
			return a, true
		}
	}
	return apiRange{}, false
}

// apiName is the metric and log name of a served API key, or "other".
func apiName(key int16) string {
	if _, ok := lookupRange(served, key); ok {
		return kmsg.NameForKey(key)
	}
	if _, ok := lookupRange(groupServed, key); ok {
		return kmsg.NameForKey(key)
	}
	return apiOther
}

// softwareName is the pattern Kafka's ApiVersionsRequest.isValid applies
// to v3+ client software names and versions.
var softwareName = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)

// handleApiVersions answers ApiVersions.
//
// Behavior:
//   - A supported version (0-4) gets every served API with its range; v3+
//     requests whose client software name or version do not match Kafka's
//     pattern get INVALID_REQUEST (Kafka's ApiVersionsRequest.isValid).
//   - Any other version (the request body unread) gets a v0 response with
//     UNSUPPORTED_VERSION and the ApiVersions range only, so the client
//     retries with a version it shares (KIP-511); see unsupportedApiVersions.
//   - No features are advertised; the finalized features epoch is -1.
func (s *Server) handleApiVersions(req *kmsg.ApiVersionsRequest) *kmsg.ApiVersionsResponse {
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if req.Version >= 3 && (!softwareName.MatchString(req.ClientSoftwareName) || !softwareName.MatchString(req.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	apis := slices.Clone(served)
	if s.groups != nil || s.fwd != nil {
		apis = append(apis, groupServed...)
	}
	if s.cfg.SASL() {
		apis = append(apis, saslServed...)
	}
	for _, a := range apis {
		resp.ApiKeys = append(resp.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: a.key, MinVersion: a.min, MaxVersion: a.max})
	}
	return resp
}

// unsupportedApiVersions is Kafka's answer to an ApiVersions request at a
// version it does not know: a v0 response (written with response header
// v0, as every ApiVersions response is) with UNSUPPORTED_VERSION and the
// ApiVersions versions it does know.
func unsupportedApiVersions() *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	a, _ := lookupRange(served, int16(kmsg.ApiVersions))
	resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: a.key, MinVersion: a.min, MaxVersion: a.max}}
	return resp
}
