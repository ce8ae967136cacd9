package copier

import (
	"reflect"
	"testing"

	"github.com/tierd/tierd/internal/remotelog"
)

// A round of sampled checks takes the partitions after the cursor in
// turn, wrapping round, never one twice.
func TestAuditSamplePartitions(t *testing.T) {
	tp := func(p int32) remotelog.TopicPartition { return remotelog.TopicPartition{Topic: "t", Partition: p} }
	three := []remotelog.TopicPartition{tp(0), tp(1), tp(2)}
	for _, tc := range []struct {
		name             string
		owned            []remotelog.TopicPartition
		cursor, perRound int
		want             []remotelog.TopicPartition
		wantCursor       int
	}{
		{"none owned", nil, 4, 2, nil, 4},
		{"no checks per round", three, 1, 0, nil, 1},
		{"first round", three, 0, 1, []remotelog.TopicPartition{tp(1)}, 1},
		{"two after the cursor", three, 1, 2, []remotelog.TopicPartition{tp(2), tp(0)}, 3},
		{"more checks than partitions", three, 0, 5, []remotelog.TopicPartition{tp(1), tp(2), tp(0)}, 3},
		{"cursor past the end", three, 7, 1, []remotelog.TopicPartition{tp(2)}, 8},
		{"one partition", three[:1], 3, 2, []remotelog.TopicPartition{tp(0)}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, cursor := samplePartitions(tc.owned, tc.cursor, tc.perRound)
			if !reflect.DeepEqual(got, tc.want) || cursor != tc.wantCursor {
				t.Fatalf("samplePartitions = %v, cursor %d; want %v, cursor %d", got, cursor, tc.want, tc.wantCursor)
			}
		})
	}
}

// A sampled partition gives the copy at its cursor, and the first other
// copy a check may clear of its damage mark; a copy whose objects differ
// from its manifest is not taken again.
func TestAuditSampleCopies(t *testing.T) {
	row := func(start int64, damaged string) remotelog.SegmentMetadata {
		return remotelog.SegmentMetadata{StartOffset: start, Damaged: damaged}
	}
	missing := damagedMissing + "00000000000000000010.log"
	fin := []remotelog.SegmentMetadata{row(0, ""), row(10, missing), row(20, ""), row(30, "manifest missing from the bucket"),
		row(40, damagedChecksum+"segment")}
	for _, tc := range []struct {
		name       string
		fin        []remotelog.SegmentMetadata
		cursor     int
		want       []int64 // start offsets
		wantCursor int
	}{
		{"no copies", nil, 3, nil, 3},
		{"first, and the first damaged", fin, 0, []int64{0, 10}, 1},
		{"the damaged one itself, then the next damaged", fin, 1, []int64{10, 30}, 2},
		{"a manifest missing is rechecked too", fin, 3, []int64{30, 10}, 4},
		{"a checksum mismatch is not rechecked", []remotelog.SegmentMetadata{row(0, ""), fin[4]}, 0, []int64{0}, 1},
		{"cursor wraps", fin, 7, []int64{20, 10}, 3},
		{"whole copies only", []remotelog.SegmentMetadata{row(0, ""), row(10, "")}, 1, []int64{10}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, cursor := sampleCopies(tc.fin, tc.cursor)
			var starts []int64
			for _, r := range got {
				starts = append(starts, r.StartOffset)
			}
			if !reflect.DeepEqual(starts, tc.want) || cursor != tc.wantCursor {
				t.Fatalf("sampleCopies took %v, cursor %d; want %v, cursor %d", starts, cursor, tc.want, tc.wantCursor)
			}
		})
	}
}
