package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/tierd/tierd/grpcapi"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	testtools "github.com/tierd/tierd/internal/testutil/tools"
)

// needChromium returns Debian's chromium, or skips the test.
func needChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testtools.Skip(t, "the status page's browser test needs chromium: it is not on PATH", "the Debian package chromium")
	return ""
}

// headless runs the browser on url with the given mode flags and returns
// its standard output.
func headless(t *testing.T, browser, url string, mode ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := append([]string{"--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", "--disable-extensions",
		"--disable-dev-shm-usage", "--hide-scrollbars", "--user-data-dir=" + t.TempDir()}, mode...)
	cmd := exec.CommandContext(ctx, browser, append(args, url)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s", browser, mode, err, stderr.String())
	}
	return stdout.Bytes()
}

// pageStatus is "tierd status --json" of the running tierd, by partition.
func pageStatus(t *testing.T, cfgPath string) map[string]remotelog.PartitionStatus {
	t.Helper()
	code, o, e := runCmd("status", "--config", cfgPath, "--json")
	var s remotelog.TieringStatus
	if err := json.Unmarshal([]byte(o), &s); code != 0 || err != nil {
		t.Logf("status: exit %d %v %s", code, err, e)
		return nil
	}
	out := map[string]remotelog.PartitionStatus{}
	for _, p := range s.Partitions {
		out[fmt.Sprintf("%s-%d", p.Topic, p.Partition)] = p
	}
	return out
}

// waitStatus polls the status until ok accepts it.
func waitStatus(t *testing.T, cfgPath, what string, ok func(map[string]remotelog.PartitionStatus) bool) {
	t.Helper()
	var last map[string]remotelog.PartitionStatus
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if last = pageStatus(t, cfgPath); last != nil && ok(last) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never showed %s: %+v", what, last)
		}
	}
}

// TestStatusPageInChromium loads the status page of a running tierd in
// headless Chromium and checks what it rendered, with four partitions:
// events-0 up to date (its rolled segments remote only), audit-0 waiting
// because replication-offset-checkpoint lacks it (local only), payments-0
// waiting behind a corrupt segment (its first segment on both tiers, a
// topic-level local.retention.ms keeping it), and gone-0, whose directory
// went and whose deletion an operator ordered (pending delete, in the
// journal). The config's SASL password must not appear. The screenshot
// must show the timeline's colours; TIERD_STATUS_SCREENSHOT=FILE keeps it
// (docs/status.png).
func TestStatusPageInChromium(t *testing.T) {
	browser := needChromium(t)
	root := t.TempDir()
	logs := filepath.Join(root, "logs")
	for _, p := range []string{"events-0", "audit-0", "payments-0", "gone-0"} {
		writePartition(t, filepath.Join(logs, p), 600, 0)
	}
	// payments-0's second segment fails its CRC check.
	segs, _ := filepath.Glob(filepath.Join(logs, "payments-0", "*"+kafkalog.LogSuffix))
	sort.Strings(segs)
	f, err := os.OpenFile(segs[1], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("garbage"), 300); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.WriteFile(filepath.Join(logs, kafkalog.ReplicationOffsetCheckpointFile), []byte("0\n3\nevents 0 600\npayments 0 600\ngone 0 600\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const password = "s3cr3t-hunter2"
	fetchAddr, httpAddr := freeAddr(t), freeAddr(t)
	cfgPath := filepath.Join(root, "tierd.yaml")
	y := fmt.Sprintf(`copier:
  log_dirs: [%s]
  broker_id: 1
  interval: 100ms
  file_delete_delay: 0s
  initial_retention_delay: 0s
  retention:
    local.retention.ms: 0
  topics:
    payments: {local.retention.ms: -1, local.retention.bytes: -1}
bucket:
  type: filesystem
  filesystem: {dir: %s}
metadata: {dir: %s}
fetch: {listen: %s}
http: {listen: "%s"}
kafka:
  sasl: {mechanism: PLAIN, username: tierd-page, password: %s}
`, logs, filepath.Join(root, "bucket"), filepath.Join(root, "metadata"), fetchAddr, httpAddr, password)
	if err := os.WriteFile(cfgPath, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	bucketCreate(t, cfgPath)
	startServe(t, cfgPath)
	for deadline := time.Now().Add(30 * time.Second); !healthy(httpAddr); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("tierd did not start")
		}
	}
	waitStatus(t, cfgPath, "the four partitions settled", func(s map[string]remotelog.PartitionStatus) bool {
		ev, au, pa, go0 := s["events-0"], s["audit-0"], s["payments-0"], s["gone-0"]
		return ev.State == remotelog.TierUpToDate && ev.RemoteSegments == 2 && ev.LocalSegments == 1 &&
			au.Reason == remotelog.WaitNotInCheckpoint && pa.Reason == remotelog.WaitCorruptSegment && pa.RemoteSegments == 1 &&
			go0.State == remotelog.TierUpToDate && go0.RemoteSegments == 2 && go0.LocalSegments == 1
	})
	if err := os.RemoveAll(filepath.Join(logs, "gone-0")); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, cfgPath, "gone-0 remote only", func(s map[string]remotelog.PartitionStatus) bool {
		return s["gone-0"].State == remotelog.TierRemoteOnly
	})
	if code, o, e := runCmd("topics", "delete", "--config", cfgPath, "gone"); code != 0 {
		t.Fatalf("topics delete: exit %d\n%s%s", code, o, e)
	}
	waitStatus(t, cfgPath, "gone-0 out of the live partitions", func(s map[string]remotelog.PartitionStatus) bool { _, ok := s["gone-0"]; return !ok })

	url := "http://" + httpAddr + "/"
	doc, err := html.Parse(bytes.NewReader(headless(t, browser, url, "--dump-dom")))
	if err != nil {
		t.Fatal(err)
	}
	checkPartitionRows(t, doc, logs)
	checkTimelines(t, doc)
	checkJournalAndConfig(t, doc, logs, password)

	shot := filepath.Join(t.TempDir(), "status.png")
	headless(t, browser, url, "--screenshot="+shot, "--window-size=1400,1000")
	checkScreenshot(t, shot)
	if keep := os.Getenv("TIERD_STATUS_SCREENSHOT"); keep != "" {
		data, _ := os.ReadFile(shot)
		if err := os.WriteFile(keep, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// checkPartitionRows: each live partition's row shows its state and why.
func checkPartitionRows(t *testing.T, doc *html.Node, logs string) {
	t.Helper()
	rows := map[string]*html.Node{}
	for _, tr := range findAll(doc, func(n *html.Node) bool { return n.Data == "tr" && attr(n, "data-state") != "" }) {
		rows[attr(tr, "data-partition")] = tr
	}
	if len(rows) != 3 || rows["gone-0"] != nil {
		t.Errorf("partition rows %v, want events-0, audit-0, payments-0", keys(rows))
	}
	for name, want := range map[string]struct {
		state  remotelog.TierState
		reason remotelog.WaitReason
		texts  []string
	}{
		"events-0":   {remotelog.TierUpToDate, "", []string{"every rolled segment has a finished copy", "0-411", "2 segments"}},
		"audit-0":    {remotelog.TierWaiting, remotelog.WaitNotInCheckpoint, []string{"has no entry in the log dir's " + filepath.Join(logs, kafkalog.ReplicationOffsetCheckpointFile), "2 segments"}},
		"payments-0": {remotelog.TierWaiting, remotelog.WaitCorruptSegment, []string{"segment 206 is corrupt at byte", "0-205", "1 segment,"}},
	} {
		tr := rows[name]
		if tr == nil {
			continue
		}
		text := textOf(tr)
		ok := attr(tr, "data-state") == string(want.state) && attr(tr, "data-reason") == string(want.reason)
		for _, w := range want.texts {
			ok = ok && strings.Contains(text, w)
		}
		if !ok {
			t.Errorf("%s row: state %q reason %q, text %q; want %+v", name, attr(tr, "data-state"), attr(tr, "data-reason"), text, want)
		}
	}
}

// checkTimelines: one box per segment, in the state of its offsets, the
// boxes following on from each other.
func checkTimelines(t *testing.T, doc *html.Node) {
	t.Helper()
	want := map[string]string{
		"events-0":   "remote remote active",
		"audit-0":    "local* local active",
		"payments-0": "both local* active",
		"gone-0":     "deleting deleting",
	}
	got := map[string]string{}
	for _, tl := range findAll(doc, func(n *html.Node) bool { return hasClass(n, "tl") }) {
		var states []string
		next := int64(0)
		for _, b := range findAll(tl, func(n *html.Node) bool { return hasClass(n, "seg") }) {
			s := attr(b, "data-state")
			if !hasClass(b, "s-"+s) || attr(b, "title") == "" {
				t.Errorf("%s: box %v lacks its class or title", attr(tl, "data-partition"), b.Attr)
			}
			if hasClass(b, "next") {
				s += "*"
			}
			states = append(states, s)
			if start := attr(b, "data-start"); start != fmt.Sprint(next) {
				t.Errorf("%s: box starts at %s, want %d", attr(tl, "data-partition"), start, next)
			}
			fmt.Sscan(attr(b, "data-end"), &next)
			next++
		}
		got[attr(tl, "data-partition")] = strings.Join(states, " ")
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s timeline: %q, want %q", name, got[name], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("timelines of %v", got)
	}
	legend := textOf(byID(doc, "legend"))
	for _, s := range []string{"local and remote", "remote only", "pending delete", "copying", "rolled, local only", "active segment"} {
		if !strings.Contains(legend, s) {
			t.Errorf("legend lacks %q: %q", s, legend)
		}
	}
}

// checkJournalAndConfig: the scheduled deletion and its journal entry, and
// the config with the password redacted.
func checkJournalAndConfig(t *testing.T, doc *html.Node, logs, password string) {
	t.Helper()
	del := findAll(byID(doc, "deletions"), func(n *html.Node) bool { return n.Data == "tr" && attr(n, "data-partition") == "gone-0" })
	if len(del) != 1 || !strings.Contains(textOf(del[0]), "PENDING") || !strings.Contains(textOf(del[0]), grpcapi.LocalCaller().Principal) {
		t.Errorf("deletions table: %q", textOf(byID(doc, "deletions")))
	}
	entries := findAll(byID(doc, "journal"), func(n *html.Node) bool { return n.Data == "tr" && attr(n, "data-event") != "" })
	if len(entries) != 1 || attr(entries[0], "data-event") != remotelog.JournalScheduled || !strings.Contains(textOf(entries[0]), "gone-0") ||
		!strings.Contains(textOf(entries[0]), "operator") || !strings.Contains(textOf(entries[0]), "2 (") {
		t.Errorf("journal: %q", textOf(byID(doc, "journal")))
	}
	config := textOf(byID(doc, "config"))
	for _, want := range []string{"log_dirs: [" + logs + "]", "password: (set, not shown)", "username: tierd-page", "payments:\n      local.retention.ms: -1 # file\n      local.retention.bytes: -1 # file\n",
		"remote.log.manager.task.interval.ms: 100 # file", "copy_timeout: 5m0s # default"} {
		if !strings.Contains(config, want) {
			t.Errorf("config lacks %q:\n%s", want, config)
		}
	}
	if page := textOf(doc); strings.Contains(page, password) {
		t.Error("the page shows the SASL password")
	}
}

// checkScreenshot: the browser drew the page at the asked size, with the
// timeline's colours (remote, local, both, active, as the stylesheet has
// them).
func checkScreenshot(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 1400 || b.Dy() != 1000 {
		t.Errorf("screenshot %v, want 1400x1000", b)
	}
	colours := map[string][3]uint32{"remote": {0x3b, 0x74, 0xc4}, "local": {0xf5, 0xa2, 0x5d}, "both": {0x3f, 0x9a, 0x5a}, "active": {0xbc, 0xd4, 0xea}}
	seen := map[string]int{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			for name, c := range colours {
				if near(r>>8, c[0]) && near(g>>8, c[1]) && near(bl>>8, c[2]) {
					seen[name]++
				}
			}
		}
	}
	for name := range colours {
		if seen[name] < 100 {
			t.Errorf("screenshot has %d pixels of the %s colour", seen[name], name)
		}
	}
}

func near(a, b uint32) bool { return a+3 >= b && b+3 >= a }

func findAll(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	if n == nil {
		return nil
	}
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && match(n) {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return out
}

func byID(doc *html.Node, id string) *html.Node {
	if ns := findAll(doc, func(n *html.Node) bool { return attr(n, "id") == id }); len(ns) > 0 {
		return ns[0]
	}
	return nil
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func hasClass(n *html.Node, class string) bool {
	for _, c := range strings.Fields(attr(n, "class")) {
		if c == class {
			return true
		}
	}
	return false
}

// textOf is the text under n ("" for nil), style elements left out.
func textOf(n *html.Node) string {
	if n == nil {
		return ""
	}
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		if n.Type == html.ElementNode && n.Data == "style" {
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
