package listener

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceRefused is the message Produce v8+ responses carry.
const produceRefused = "tierd serves a read-only copy of this log; produce to the Kafka cluster"

// handleProduce answers Produce v3-v13 without writing anything.
//
// Behavior:
//   - Produce is advertised only because librdkafka (kcat) decides from
//     the Produce versions a broker advertises whether it speaks the v2
//     record format, and reads nothing modern without it.
//   - Every partition of the request gets TOPIC_AUTHORIZATION_FAILED, base
//     offset -1 and, v8+, an error message: producers report it and do not
//     retry it (franz-go, librdkafka, the Java client treat it as fatal
//     for the records).
//   - acks=0 gets no response, as Kafka sends none; nothing is written
//     either way.
//   - Topics are echoed as named (by name, or by id in v13).
func (s *Server) handleProduce(req *kmsg.ProduceRequest) *kmsg.ProduceResponse {
	if req.Acks == 0 {
		return nil
	}
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			rp.BaseOffset = -1
			if req.Version >= 8 {
				rp.ErrorMessage = kmsg.StringPtr(produceRefused)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
