package partlabels

import (
	"sync"
	"testing"
)

// The first Max partitions keep their own labels, for good; every later
// one gets the aggregate.
func TestCap(t *testing.T) {
	s := New(2)
	for _, tc := range []struct {
		topic     string
		partition int32
		wantT     string
		wantP     string
		why       string
	}{
		{"orders", 0, "orders", "0", "first"},
		{"orders", 1, "orders", "1", "second"},
		{"orders", 2, OtherTopic, OtherPartition, "over the cap"},
		{"orders", 0, "orders", "0", "admitted before stays"},
		{"payments", 0, OtherTopic, OtherPartition, "still over the cap"},
	} {
		if gt, gp := s.Labels(tc.topic, tc.partition); gt != tc.wantT || gp != tc.wantP {
			t.Errorf("%s-%d (%s): %s %s, want %s %s", tc.topic, tc.partition, tc.why, gt, gp, tc.wantT, tc.wantP)
		}
	}
	if gt, _ := New(0).Labels("a", 0); gt != OtherTopic {
		t.Errorf("cap 0 gave its own labels")
	}
}

// Concurrent callers never admit more than the cap.
func TestCapConcurrent(t *testing.T) {
	s := New(10)
	var wg sync.WaitGroup
	var mu sync.Mutex
	own := map[string]bool{}
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := int32(0); p < 50; p++ {
				topic, part := s.Labels("t", p)
				if topic != OtherTopic {
					mu.Lock()
					own[part] = true
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(own) != 10 {
		t.Fatalf("%d partitions got their own labels, want 10", len(own))
	}
}

// OnAdmit reports the aggregate and the partitions admitted before it at
// once, then each partition when first admitted, never one over the cap
// nor one twice.
func TestOnAdmit(t *testing.T) {
	s := New(2)
	s.Labels("orders", 0)
	var got []string
	s.OnAdmit(func(topic, partition string) { got = append(got, topic+"/"+partition) })
	s.Labels("orders", 0)
	s.Labels("orders", 1)
	s.Labels("orders", 1)
	s.Labels("orders", 2) // over the cap
	want := []string{OtherTopic + "/" + OtherPartition, "orders/0", "orders/1"}
	if len(got) != len(want) {
		t.Fatalf("admitted %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("admitted %v, want %v", got, want)
		}
	}
}
