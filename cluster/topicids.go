package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// IDState is what the cluster said about a topic id.
type IDState int

const (
	// IDUnknown: the answer proves nothing (an authorization failure, a
	// transport error, an old broker, an answer without the id, ...).
	// It is the zero value.
	IDUnknown IDState = iota
	// IDExists: the cluster has a topic with this id; IDStatus.Name is
	// its name.
	IDExists
	// IDGone: a broker of the expected cluster answered UNKNOWN_TOPIC_ID
	// to a Metadata request (v12 or later) naming this id.
	IDGone
)

func (s IDState) String() string {
	switch s {
	case IDExists:
		return "exists"
	case IDGone:
		return "gone"
	default:
		return "unknown"
	}
}

// IDStatus is the cluster's answer about one topic id.
type IDStatus struct {
	State IDState
	// Name is the topic's name when State is IDExists.
	Name string
	// Proof says, for a person and a journal, what was asked and
	// answered: request and version, broker, cluster id, error code,
	// time; or why the answer proves nothing.
	Proof string
}

// minTopicIDMetadataVersion is the first Metadata version whose requests a
// Kafka broker answers by topic id: KafkaApis.handleTopicMetadataRequest
// rejects topic ids in v10 and v11 (see doc.go).
const minTopicIDMetadataVersion = 12

// TopicIDs asks the cluster about topic ids (in FormatTopicID's form) with
// a Metadata request naming them by id (KIP-516), and classifies each (see
// IDState and the proof rules in the package documentation). Ids missing
// from an otherwise good answer are asked again, one per request.
//
// clusterID is the cluster id of the answers. A malformed or reserved id
// fails the call before any request (ErrBadTopicID). A failed request, or
// an answer from another cluster than Config.ClusterID or than the
// call's first answer (ErrClusterMismatch), returns an error; res then
// still holds every id, as IDUnknown where nothing was proven.
func (c *Client) TopicIDs(ctx context.Context, ids []string) (clusterID string, res map[string]IDStatus, err error) {
	var errs []error
	var order []string
	seen := map[string]bool{}
	for _, id := range ids {
		if _, err := ParseTopicID(id); err != nil {
			errs = append(errs, err)
			continue
		}
		if !seen[id] {
			seen[id] = true
			order = append(order, id)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return "", nil, err
	}
	res = make(map[string]IDStatus, len(order))
	for _, id := range order {
		res[id] = IDStatus{Proof: "not asked"}
	}
	if len(order) == 0 {
		return "", res, nil
	}
	clusterID, missing, err := c.askIDs(ctx, order, "", res)
	if err != nil {
		return clusterID, res, err
	}
	for _, id := range missing {
		if _, again, err := c.askIDs(ctx, []string{id}, clusterID, res); err != nil {
			return clusterID, res, err
		} else if len(again) > 0 {
			res[id] = IDStatus{Proof: res[id].Proof + "; asked alone, still not in the answer"}
		}
	}
	return clusterID, res, nil
}

// askIDs sends one Metadata request naming ids and sets res for each. want
// is the cluster id an earlier answer of the same call gave ("" for the
// first request). It returns the answer's cluster id and the ids the
// answer did not mention (each IDUnknown in res).
func (c *Client) askIDs(ctx context.Context, ids []string, want string, res map[string]IDStatus) (string, []string, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false
	asked := map[string]bool{}
	for _, id := range ids {
		raw, _ := ParseTopicID(id) // checked by TopicIDs
		rt := kmsg.NewMetadataRequestTopic()
		rt.TopicID = raw
		req.Topics = append(req.Topics, rt)
		asked[id] = true
	}
	unknownAll := func(why string) {
		for _, id := range ids {
			res[id] = IDStatus{Proof: why}
		}
	}
	kresp, meta, err := c.request(ctx, req)
	at := time.Now().UTC().Format(time.RFC3339Nano)
	if err != nil {
		unknownAll(fmt.Sprintf("no answer at %s: %v", at, err))
		return "", nil, err
	}
	resp := kresp.(*kmsg.MetadataResponse)
	cid := ""
	if resp.ClusterID != nil {
		cid = *resp.ClusterID
	}
	what := fmt.Sprintf("Metadata v%d by topic id, answered by %s of cluster %q at %s", resp.GetVersion(), source(meta, resp.Brokers), cid, at)
	c.log.Debug("asked the cluster about topic ids", "ids", len(ids), "answer", what)
	if want == "" {
		want = c.cfg.ClusterID
	}
	if want != "" && cid != want {
		err := fmt.Errorf("%w: %s, want cluster %q", ErrClusterMismatch, what, want)
		unknownAll(err.Error())
		return cid, nil, err
	}
	switch {
	case resp.GetVersion() < minTopicIDMetadataVersion:
		unknownAll(fmt.Sprintf("%s: Kafka answers topic ids only from Metadata v%d", what, minTopicIDMetadataVersion))
		return cid, nil, nil
	case resp.ErrorCode != 0:
		unknownAll(fmt.Sprintf("%s: top-level error %v", what, kerr.ErrorForCode(resp.ErrorCode)))
		return cid, nil, nil
	case cid == "":
		unknownAll(what + ": the answer has no cluster id")
		return cid, nil, nil
	case len(resp.Brokers) == 0:
		unknownAll(what + ": the answer lists no live brokers (the broker's metadata is not loaded)")
		return cid, nil, nil
	}
	answered := map[string]IDStatus{}
	for _, rt := range resp.Topics {
		id := FormatTopicID(rt.TopicID)
		if !asked[id] {
			continue
		}
		st := classify(rt, what, id)
		if prev, dup := answered[id]; dup && (prev.State != st.State || prev.Name != st.Name) {
			st = IDStatus{Proof: fmt.Sprintf("%s: conflicting entries for topic id %s", what, id)}
		}
		answered[id] = st
	}
	var missing []string
	for _, id := range ids {
		st, ok := answered[id]
		if !ok {
			missing = append(missing, id)
			st = IDStatus{Proof: fmt.Sprintf("%s: topic id %s not in the answer", what, id)}
		}
		res[id] = st
	}
	return cid, missing, nil
}

// classify turns one topic of an id-based Metadata answer into an IDStatus.
func classify(rt kmsg.MetadataResponseTopic, what, id string) IDStatus {
	switch {
	case rt.ErrorCode == 0 && rt.Topic != nil && *rt.Topic != "":
		return IDStatus{State: IDExists, Name: *rt.Topic, Proof: fmt.Sprintf("%s: topic id %s is topic %q", what, id, *rt.Topic)}
	case rt.ErrorCode == 0:
		return IDStatus{Proof: fmt.Sprintf("%s: topic id %s answered without a name", what, id)}
	case rt.ErrorCode == kerr.UnknownTopicID.Code:
		return IDStatus{State: IDGone, Proof: fmt.Sprintf("%s: %s (error code %d) for topic id %s", what, kerr.UnknownTopicID.Message, rt.ErrorCode, id)}
	default:
		return IDStatus{Proof: fmt.Sprintf("%s: %v (error code %d) for topic id %s, which proves nothing", what, kerr.ErrorForCode(rt.ErrorCode), rt.ErrorCode, id)}
	}
}
