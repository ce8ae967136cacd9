package statuspage

import (
	"fmt"
	"strings"
	"time"

	"github.com/tierd/tierd/internal/remotelog"
)

// summary is the header's line about the copier's passes and the counts.
type summary struct {
	Running     bool
	Passes      int64
	LastPass    string
	LastSuccess string
	Total       int
	Counts      []stateCount
}

// PassesText is "1 pass", "2 passes".
func (s summary) PassesText() string { return countText(s.Passes, "pass", "passes") }

// TotalText is "1 partition", "2 partitions".
func (s summary) TotalText() string { return countText(int64(s.Total), "partition", "partitions") }

func countText(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

type stateCount struct {
	State   remotelog.TierState
	N       int
	Reasons string // "not_in_checkpoint 1, corrupt_segment 1" for waiting
}

func summarize(st remotelog.TieringStatus, now time.Time) summary {
	s := summary{Running: st.Running, Passes: st.Passes, LastPass: ago(st.LastPassMs, now), LastSuccess: ago(st.LastSuccessMs, now), Total: len(st.Partitions)}
	if st.LastPassMs < 0 {
		s.LastPass = "none yet"
	}
	if st.LastSuccessMs < 0 {
		s.LastSuccess = "none yet"
	}
	states, reasons := st.Counts()
	for _, t := range remotelog.TierStates {
		c := stateCount{State: t, N: states[t]}
		if t == remotelog.TierWaiting {
			var rs []string
			for _, r := range remotelog.WaitReasons {
				if reasons[r] > 0 {
					rs = append(rs, fmt.Sprintf("%s %d", r, reasons[r]))
				}
			}
			c.Reasons = strings.Join(rs, ", ")
		}
		s.Counts = append(s.Counts, c)
	}
	return s
}

// partRow is one row of the partitions table, as text.
type partRow struct {
	Name          string
	State         remotelog.TierState
	Reason        remotelog.WaitReason
	Held          string
	Detail        string
	Error         string
	Copying       string
	Local         string // range, "-" for none
	LocalSize     string
	HighWatermark string
	Remote        string // range, "-" for none
	RemoteSize    string
	Pending       string
	DeleteLag     string
	LastCopy      string
	LastCopyAt    string
	Dir           string
}

func partitionRow(p remotelog.PartitionStatus, now time.Time) partRow {
	r := partRow{Name: fmt.Sprintf("%s-%d", p.Topic, p.Partition), State: p.State, Reason: p.Reason, Held: p.Held, Detail: p.Detail,
		HighWatermark: offsetText(p.HighWatermark), LastCopy: ago(p.LastCopyMs, now), LastCopyAt: timeText(p.LastCopyMs), Dir: p.Dir}
	if p.Error != "" && !strings.Contains(p.Detail, p.Error) {
		r.Error = p.Error
	}
	if c := p.Copying; c != nil {
		pct := 0.0
		if c.Bytes > 0 {
			pct = 100 * float64(c.SentBytes) / float64(c.Bytes)
		}
		r.Copying = fmt.Sprintf("segment %d-%d: %s of %s (%.0f%%), started %s", c.BaseOffset, c.EndOffset, SizeText(c.SentBytes), SizeText(c.Bytes), pct, ago(c.StartedMs, now))
	}
	r.Local = "-"
	if p.LocalSegments > 0 {
		r.Local = fmt.Sprintf("%d.. (active %s)", p.LocalLogStartOffset, offsetText(p.ActiveBaseOffset))
		r.LocalSize = fmt.Sprintf("%s, %s", segments(p.LocalSegments), SizeText(p.LocalBytes))
	}
	r.Remote = "-"
	if p.HighestTieredOffset >= 0 {
		r.Remote = fmt.Sprintf("%d-%d", p.LogStartOffset, p.HighestTieredOffset)
		r.RemoteSize = fmt.Sprintf("%s, %s", segments(p.RemoteSegments), SizeText(p.RemoteBytes))
		r.RemoteSize += StoredText(p)
	}
	r.Pending = "0"
	if p.PendingSegments > 0 {
		r.Pending = fmt.Sprintf("%s, %s", segments(p.PendingSegments), SizeText(p.PendingBytes))
	}
	r.DeleteLag = "0"
	if p.DeleteLagSegments > 0 {
		r.DeleteLag = fmt.Sprintf("%s, %s", segments(p.DeleteLagSegments), SizeText(p.DeleteLagBytes))
	}
	return r
}

// stateLabel is a partition's state in a few words, for its timeline.
func stateLabel(p remotelog.PartitionStatus) string {
	switch {
	case p.State == remotelog.TierWaiting && p.Held != "":
		return fmt.Sprintf("waiting: %s (%s)", p.Reason, p.Held)
	case p.State == remotelog.TierWaiting:
		return "waiting: " + string(p.Reason)
	}
	return string(p.State)
}

// deletionRow is a scheduled partition deletion, as text.
type deletionRow struct {
	Name, TopicID, State, Reason, Proof, Scheduled, Due string
	Segments                                            int
	Bytes                                               string
}

func deletionView(d remotelog.PartitionDeletion, now time.Time) deletionRow {
	return deletionRow{Name: d.TopicPartition.String(), TopicID: d.TopicID, State: string(d.State), Reason: string(d.Reason), Proof: d.Proof,
		Scheduled: timeText(d.ScheduledMs), Due: timeText(d.DueMs) + " (" + dueText(d.DueMs, now) + ")", Segments: len(d.Segments), Bytes: SizeText(d.Bytes())}
}

// journalRow is one journal entry, as text.
type journalRow struct {
	Seq                                               int64
	Time, Event, Name, TopicID, Reason, Proof, Detail string
	Segments                                          int
	Bytes                                             string
}

func journalView(e remotelog.JournalEntry) journalRow {
	return journalRow{Seq: e.Seq, Time: timeText(e.TimeMs), Event: e.Event, Name: e.TopicPartition.String(), TopicID: e.TopicID,
		Reason: string(e.Reason), Proof: e.Proof, Detail: e.Detail, Segments: e.Segments, Bytes: SizeText(e.Bytes)}
}

// Title is a box's tooltip: its offsets, size and where they are.
func (b Box) Title() string {
	end := offsetText(b.End)
	if b.End < 0 {
		end = "(open)"
	}
	t := fmt.Sprintf("offsets %d-%s: %s", b.Start, end, b.State)
	if b.Bytes > 0 {
		t += ", " + SizeText(b.Bytes)
	}
	if b.Note != "" {
		t += " (" + b.Note + ")"
	}
	return t
}

// segments is "1 segment", "2 segments".
func segments(n int) string {
	if n == 1 {
		return "1 segment"
	}
	return fmt.Sprintf("%d segments", n)
}

func dueText(dueMs int64, now time.Time) string {
	d := time.UnixMilli(dueMs).Sub(now).Round(time.Second)
	if d <= 0 {
		return "due now"
	}
	return "due in " + d.String()
}

func offsetText(o int64) string {
	if o < 0 {
		return "-"
	}
	return fmt.Sprint(o)
}

// timeText prints ms since the epoch in UTC, "-" for none.
func timeText(ms int64) string {
	if ms < 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05Z")
}

// ago prints ms since the epoch as how long before now, "-" for none.
// StoredText tells what the copies take in the bucket when some are
// chunked (", 10.1 KiB stored, all chunked, all encrypted"); "" when
// none is.
func StoredText(p remotelog.PartitionStatus) string {
	if p.ChunkedSegments == 0 {
		return ""
	}
	form := "all chunked"
	if p.ChunkedSegments < p.RemoteSegments {
		form = fmt.Sprintf("%d of %d chunked", p.ChunkedSegments, p.RemoteSegments)
	}
	switch {
	case p.EncryptedSegments == 0:
	case p.EncryptedSegments == p.RemoteSegments:
		form += ", all encrypted"
	default:
		form += fmt.Sprintf(", %d encrypted", p.EncryptedSegments)
	}
	return fmt.Sprintf(", %s stored, %s", SizeText(p.RemoteStoredBytes), form)
}

func ago(ms int64, now time.Time) string {
	if ms < 0 {
		return "-"
	}
	d := max(now.Sub(time.UnixMilli(ms)).Round(time.Second), 0)
	return d.String() + " ago"
}

// SizeText prints b bytes in binary units ("512 B", "1.5 MiB"); the CLI's
// status and segment listings print sizes the page's way.
func SizeText(b int64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := int64(unit), 0
	for n := b / unit; n >= unit; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(b)/float64(div), "KMGTPE"[exp])
}
