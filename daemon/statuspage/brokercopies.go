package statuspage

import (
	"fmt"
	"time"
)

// BrokerCopies is what the page shows of the copies a broker makes
// through tierd's RSM endpoint (package rsmapi): the broker's own remote
// log metadata is their truth; these are tierd's records of them.
type BrokerCopies struct {
	// Endpoint is where the endpoint listens (scheme://host:port).
	Endpoint, Prefix string
	// InFlight are copies running now, Stored the copies tierd stored and
	// answered (StoredBytes of .log), Unfinished those its janitor still
	// has to delete.
	InFlight, Stored, Unfinished int
	StoredBytes                  int64
	// Requests and failures since start.
	Copies, CopyErrors, Fetches, FetchErrors, Deletes, DeleteErrors, AuthFailures int64
	// LastError, at LastErrorMs (ms since the epoch; 0: none).
	LastError   string
	LastErrorMs int64
	Partitions  []BrokerPartition
}

// BrokerPartition sums one partition's broker-owned copies.
type BrokerPartition struct {
	Topic                  string
	Partition              int32
	Stored                 int
	Bytes                  int64
	StartOffset, EndOffset int64 // of the stored copies; -1 when none
	Started, Deleting      int   // rows COPY_SEGMENT_STARTED, DELETE_SEGMENT_STARTED
	LastCopyMs             int64 // -1: none
}

// WithBrokerCopies shows the RSM endpoint's copies, read by get at every
// request (nil: no such section).
func WithBrokerCopies(get func() (BrokerCopies, error)) Option {
	return func(p *Page) { p.brokerCopies = get }
}

// brokerView is the section as the template renders it.
type brokerView struct {
	BrokerCopies
	StoredSize, LastErrorAgo string
	Rows                     []brokerRow
}

type brokerRow struct {
	Name, Size, Range, LastCopy, Unfinished string
	Stored                                  int
}

func brokerSection(b BrokerCopies, now time.Time) *brokerView {
	v := &brokerView{BrokerCopies: b, StoredSize: SizeText(b.StoredBytes)}
	if b.LastErrorMs > 0 {
		v.LastErrorAgo = ago(b.LastErrorMs, now)
	}
	for _, p := range b.Partitions {
		r := brokerRow{Name: fmt.Sprintf("%s-%d", p.Topic, p.Partition), Size: SizeText(p.Bytes), Range: "-", LastCopy: ago(p.LastCopyMs, now), Stored: p.Stored}
		if p.Stored > 0 {
			r.Range = fmt.Sprintf("%d-%d", p.StartOffset, p.EndOffset)
		}
		if n := p.Started + p.Deleting; n > 0 {
			r.Unfinished = fmt.Sprintf("%d started, %d deleting", p.Started, p.Deleting)
		}
		v.Rows = append(v.Rows, r)
	}
	return v
}
