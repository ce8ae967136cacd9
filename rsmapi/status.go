package rsmapi

import (
	"net/http"
	"sort"
	"strconv"

	"github.com/tierd/tierd/internal/remotelog"
)

// Status is what the endpoint reports for tierd status and the status
// page (GET /v1/status, a tools' route beside wire version 1).
type Status struct {
	Listen string `json:"listen"`
	TLS    bool   `json:"tls"`
	Prefix string `json:"prefix"`
	// CopiesInFlight are copies running now.
	CopiesInFlight int `json:"copiesInFlight"`
	// Stored and StoredBytes count the COPY_SEGMENT_FINISHED rows and
	// their .log bytes: copies tierd stored and answered (or rebuilt from
	// their manifests); the broker's own state of each is its own.
	Stored      int   `json:"copiesStored"`
	StoredBytes int64 `json:"storedBytes"`
	// Unfinished counts COPY_SEGMENT_STARTED rows of copies not in flight
	// and DELETE_SEGMENT_STARTED rows: objects the janitor deletes.
	Unfinished int `json:"unfinished"`
	// Requests and failures since start.
	Copies       int64 `json:"copies"`
	CopyErrors   int64 `json:"copyErrors"`
	Fetches      int64 `json:"fetches"`
	FetchErrors  int64 `json:"fetchErrors"`
	Deletes      int64 `json:"deletes"`
	DeleteErrors int64 `json:"deleteErrors"`
	AuthFailures int64 `json:"authFailures"`
	// LastError is the last failed request's error ("" when none), at
	// LastErrorMs (ms since the epoch).
	LastError   string `json:"lastError,omitempty"`
	LastErrorMs int64  `json:"lastErrorMs,omitempty"`
	// CatalogueError says why the rows could not be read ("" when they
	// were).
	CatalogueError string            `json:"catalogueError,omitempty"`
	Partitions     []PartitionCopies `json:"partitions"`
}

// PartitionCopies sums one partition's broker-owned copies.
type PartitionCopies struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Stored, Bytes: COPY_SEGMENT_FINISHED rows and their bytes, over
	// offsets StartOffset to EndOffset (-1 when none).
	Stored      int   `json:"stored"`
	Bytes       int64 `json:"bytes"`
	StartOffset int64 `json:"startOffset"`
	EndOffset   int64 `json:"endOffset"`
	// Started and Deleting count COPY_SEGMENT_STARTED and
	// DELETE_SEGMENT_STARTED rows.
	Started  int `json:"started"`
	Deleting int `json:"deleting"`
	// LastCopyMs is the newest finished copy's event time (-1: none).
	LastCopyMs int64 `json:"lastCopyMs"`
}

// Status returns the endpoint's status, reading the catalogue.
func (s *Server) Status() Status {
	st := Status{Listen: s.Addr(), TLS: s.tls != nil, Prefix: s.cfg.Prefix, CopiesInFlight: s.flights.copying(),
		Copies: s.m.nCopies.Load(), CopyErrors: s.m.nCopyErrs.Load(), Fetches: s.m.nFetches.Load(), FetchErrors: s.m.nFetchErrs.Load(),
		Deletes: s.m.nDeletes.Load(), DeleteErrors: s.m.nDeleteErrs.Load(), AuthFailures: s.m.nAuth.Load(), Partitions: []PartitionCopies{}}
	if st.Listen == "" {
		st.Listen = s.cfg.Listen
	}
	s.statusMu.Lock()
	st.LastError, st.LastErrorMs = s.lastError, s.lastErrMs
	s.statusMu.Unlock()
	tps, err := s.cat.BrokerPartitions()
	if err != nil {
		st.CatalogueError = err.Error()
		return st
	}
	for _, tp := range tps {
		rows, err := s.cat.BrokerCopies(tp)
		if err != nil {
			st.CatalogueError = err.Error()
			continue
		}
		p := Summarize(tp, rows)
		st.Stored += p.Stored
		st.StoredBytes += p.Bytes
		st.Unfinished += p.Started + p.Deleting
		st.Partitions = append(st.Partitions, p)
	}
	st.Unfinished = max(st.Unfinished-st.CopiesInFlight, 0)
	sort.Slice(st.Partitions, func(i, j int) bool {
		a, b := st.Partitions[i], st.Partitions[j]
		return a.Topic < b.Topic || (a.Topic == b.Topic && a.Partition < b.Partition)
	})
	return st
}

// Summarize sums one partition's rows.
func Summarize(tp remotelog.TopicPartition, rows []remotelog.SegmentMetadata) PartitionCopies {
	p := PartitionCopies{Topic: tp.Topic, Partition: tp.Partition, StartOffset: -1, EndOffset: -1, LastCopyMs: -1}
	for _, r := range rows {
		switch r.State {
		case remotelog.CopySegmentFinished:
			p.Stored++
			p.Bytes += r.SizeInBytes
			if p.StartOffset < 0 || r.StartOffset < p.StartOffset {
				p.StartOffset = r.StartOffset
			}
			p.EndOffset = max(p.EndOffset, r.EndOffset)
			p.LastCopyMs = max(p.LastCopyMs, r.EventTimestampMs)
		case remotelog.CopySegmentStarted:
			p.Started++
		case remotelog.DeleteSegmentStarted:
			p.Deleting++
		}
	}
	return p
}

func (s *Server) handleStatus(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Status())
}

// RowsAnswer is GET /v1/segments/{topic}/{partition}'s body (a tools'
// route): the partition's rows, by start offset.
type RowsAnswer struct {
	Rows []remotelog.SegmentMetadata `json:"rows"`
}

func (s *Server) handleRows(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	if err := checkTopic(topic); err != nil {
		answerError(w, err)
		return
	}
	p, err := strconv.ParseInt(r.PathValue("partition"), 10, 32)
	if err != nil || p < 0 {
		answerError(w, invalidf("partition %q", r.PathValue("partition")))
		return
	}
	rows, err := s.cat.BrokerCopies(remotelog.TopicPartition{Topic: topic, Partition: int32(p)})
	if err != nil {
		answerError(w, inCatalogue(err))
		return
	}
	if rows == nil {
		rows = []remotelog.SegmentMetadata{}
	}
	writeJSON(w, http.StatusOK, RowsAnswer{Rows: rows})
}
