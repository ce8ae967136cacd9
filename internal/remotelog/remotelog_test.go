package remotelog

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"testing"
)

func TestTransitions(t *testing.T) {
	legal := map[[2]SegmentState]bool{
		{CopySegmentStarted, CopySegmentFinished}:     true,
		{CopySegmentStarted, DeleteSegmentStarted}:    true,
		{CopySegmentFinished, DeleteSegmentStarted}:   true,
		{DeleteSegmentStarted, DeleteSegmentStarted}:  true,
		{DeleteSegmentStarted, DeleteSegmentFinished}: true,
	}
	for from := CopySegmentStarted; from <= DeleteSegmentFinished; from++ {
		for to := CopySegmentStarted; to <= DeleteSegmentFinished; to++ {
			err := CheckTransition(from, to)
			if legal[[2]SegmentState{from, to}] != (err == nil) {
				t.Errorf("%s -> %s: %v", from, to, err)
			}
			if err != nil && !errors.Is(err, ErrIllegalTransition) {
				t.Errorf("%s -> %s: error not marked: %v", from, to, err)
			}
		}
	}
}

func TestIDsAndJSON(t *testing.T) {
	a, b := NewSegmentID(), NewSegmentID()
	if a == b || len(a.String()) != 22 {
		t.Fatalf("ids %s %s", a, b)
	}
	if p, err := ParseSegmentID(a.String()); err != nil || p != a {
		t.Fatalf("parse: %v", err)
	}
	if _, err := ParseSegmentID("short"); err == nil {
		t.Fatal("bad id parsed")
	}
	m := SegmentMetadata{TopicPartition: TopicPartition{Topic: "t", Partition: 1}, ID: a, StartOffset: 5, EndOffset: 9,
		State: DeleteSegmentStarted, SegmentLeaderEpochs: []EpochEntry{{Epoch: 2, StartOffset: 5}}}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var back SegmentMetadata
	if err := json.Unmarshal(data, &back); err != nil || back.ID != a || back.State != DeleteSegmentStarted || back.SegmentLeaderEpochs[0].Epoch != 2 {
		t.Fatalf("round trip %s: %+v %v", data, back, err)
	}
	if err := json.Unmarshal([]byte(`{"state":"BOGUS"}`), &back); err == nil {
		t.Fatal("unknown state accepted")
	}
	if !m.Contains(5) || !m.Contains(9) || m.Contains(10) || m.Contains(4) {
		t.Fatal("Contains")
	}
}

// Supersede agrees with the quadratic definition on random rows.
func TestSupersedeMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 500; round++ {
		var rows []SegmentMetadata
		for i := 0; i < 1+rng.IntN(12); i++ {
			start := int64(rng.IntN(50))
			rows = append(rows, SegmentMetadata{ID: NewSegmentID(), StartOffset: start, EndOffset: start + int64(rng.IntN(30)),
				EventTimestampMs: int64(rng.IntN(5))})
		}
		want := map[SegmentID]bool{}
		for _, r := range rows {
			covered := false
			for _, o := range rows {
				covered = covered || (o.ID != r.ID && o.StartOffset <= r.StartOffset && o.EndOffset >= r.EndOffset && Newer(&o, &r))
			}
			if !covered {
				want[r.ID] = true
			}
		}
		got := Supersede(rows)
		if len(got) != len(want) {
			t.Fatalf("round %d: kept %d, want %d", round, len(got), len(want))
		}
		for i, r := range got {
			if !want[r.ID] || (i > 0 && got[i-1].StartOffset > r.StartOffset) {
				t.Fatalf("round %d: kept %+v", round, r)
			}
		}
	}
}

func BenchmarkSupersede(b *testing.B) {
	rows := make([]SegmentMetadata, 50000)
	for i := range rows {
		rows[i] = SegmentMetadata{ID: NewSegmentID(), StartOffset: int64(i) * 100, EndOffset: int64(i)*100 + 99}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		Supersede(rows)
	}
}
