package rsmapi

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
)

// nothingStored fails the test when the rig's bucket or catalogue holds
// anything.
func nothingStored(t *testing.T, r *rig) {
	t.Helper()
	if keys := r.keys(); len(keys) != 0 {
		t.Errorf("objects stored: %v", keys)
	}
	if tps, _ := r.cat.BrokerPartitions(); len(tps) != 0 {
		t.Errorf("catalogue rows written for %v", tps)
	}
}

func TestAuth(t *testing.T) {
	r := newRig(t)
	s := r.layout(fixSmall, remotelog.TopicPartition{Topic: "orders", Partition: 0})
	routes := []struct{ method, path string }{
		{http.MethodPut, s.path()}, {http.MethodGet, s.path() + "/log"}, {http.MethodGet, s.path() + "/index/OFFSET"},
		{http.MethodDelete, s.path()}, {http.MethodGet, "/v1/health"}, {http.MethodGet, "/v1/status"}, {http.MethodGet, "/v1/nowhere"},
	}
	for _, rt := range routes {
		for _, tc := range []struct {
			name, token, reason string
			hdr                 []string
		}{
			{"none", "", "missing", nil},
			{"wrong", "not-the-token-at-all-0123456789", "wrong", nil},
			{"prefix of the token", testToken[:len(testToken)-1], "wrong", nil},
			{"the token and more", testToken + "x", "wrong", nil},
			{"another scheme", "", "missing", []string{"Authorization", "Basic " + testToken}},
			{"empty bearer", "", "missing", []string{"Authorization", "Bearer "}},
		} {
			var body *bytes.Reader
			if rt.method == http.MethodPut {
				body = bytes.NewReader(s.uploadBody())
			} else {
				body = bytes.NewReader(nil)
			}
			a := r.do(rt.method, rt.path, body, tc.token, tc.hdr...)
			if a.code != http.StatusUnauthorized || a.reason() != "UNAUTHENTICATED" || a.h.Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s, token %s: %d %s; want 401 UNAUTHENTICATED", rt.method, rt.path, tc.name, a.code, a.body)
			}
			if strings.Contains(string(a.body), testToken[:8]) {
				t.Errorf("%s %s: the answer holds part of the token: %s", rt.method, rt.path, a.body)
			}
		}
	}
	nothingStored(t, r)
	if got := r.counter("tierd_rsm_auth_failures_total", "reason", "missing") + r.counter("tierd_rsm_auth_failures_total", "reason", "wrong"); got != float64(6*len(routes)) {
		t.Errorf("tierd_rsm_auth_failures_total = %v, want %d", got, 6*len(routes))
	}
	if a := r.do(http.MethodGet, "/v1/health", nil, "-"); a.code != http.StatusOK {
		t.Errorf("health with the token: %d %s", a.code, a.body)
	}
}

func TestTokenReload(t *testing.T) {
	r := newRig(t)
	newToken := "the-next-token-0123456789abcdef"
	if err := os.WriteFile(r.cfg.TokenFile, []byte("  "+newToken+"\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if a := r.do(http.MethodGet, "/v1/health", nil, newToken); a.code != http.StatusUnauthorized {
		t.Fatalf("the new token before the reload: %d", a.code)
	}
	if err := r.srv.ReloadToken(); err != nil {
		t.Fatal(err)
	}
	if a := r.do(http.MethodGet, "/v1/health", nil, newToken); a.code != http.StatusOK {
		t.Errorf("the new token after the reload: %d %s", a.code, a.body)
	}
	if a := r.do(http.MethodGet, "/v1/health", nil, "-"); a.code != http.StatusUnauthorized {
		t.Errorf("the old token after the reload: %d, want 401", a.code)
	}
	// An unusable file keeps the token in use.
	for _, bad := range []struct {
		content string
		mode    os.FileMode
		want    string
	}{
		{"", 0o600, "empty"},
		{"short", 0o600, "fewer than 16"},
		{"two words-0123456789abcdef", 0o600, "one word"},
		{newToken, 0o644, "other users"},
	} {
		os.Remove(r.cfg.TokenFile)
		if err := os.WriteFile(r.cfg.TokenFile, []byte(bad.content), bad.mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(r.cfg.TokenFile, bad.mode)
		err := r.srv.ReloadToken()
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("reload of a token file holding %q, mode %04o: %v; want an error saying %q", bad.content, bad.mode, err, bad.want)
		}
		if err != nil && bad.content != "" && strings.Contains(err.Error(), bad.content) {
			t.Errorf("the reload's error holds the file's content: %v", err)
		}
		if a := r.do(http.MethodGet, "/v1/health", nil, newToken); a.code != http.StatusOK {
			t.Errorf("after a failed reload the token in use is refused: %d", a.code)
		}
	}
}

func TestPathChecks(t *testing.T) {
	r := newRig(t)
	tp := remotelog.TopicPartition{Topic: "orders", Partition: 0}
	s := r.layout(fixSmall, tp)
	other := r.layout(fixOffsets, remotelog.TopicPartition{Topic: "orders", Partition: 1})
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.log")
	os.WriteFile(secret, s.log, 0o644)
	os.MkdirAll(filepath.Join(outside, "orders-0"), 0o755)
	os.WriteFile(filepath.Join(outside, "orders-0", kafkalog.FileName(0, kafkalog.LogSuffix)), s.log, 0o644)
	// A segment file that is a symbolic link out of the log dir, and a
	// partition directory that is one.
	escDir := filepath.Join(outside, "orders-5")
	os.MkdirAll(escDir, 0o755)
	os.WriteFile(filepath.Join(escDir, kafkalog.FileName(0, kafkalog.LogSuffix)), s.log, 0o644)
	if err := os.Symlink(escDir, filepath.Join(r.logDir, "orders-5")); err != nil {
		t.Fatal(err)
	}
	linked := filepath.Join(r.logDir, "orders-6")
	os.MkdirAll(linked, 0o755)
	os.Symlink(secret, filepath.Join(linked, kafkalog.FileName(0, kafkalog.LogSuffix)))
	// Another segment of the same partition.
	os.WriteFile(s.file(".other"), nil, 0o644)
	later := filepath.Join(s.dir, kafkalog.FileName(100, kafkalog.LogSuffix))
	os.WriteFile(later, s.log, 0o644)

	logOf := func(p string) func(q map[string]any) { return func(q map[string]any) { q["logSegment"] = p } }
	for _, tc := range []struct {
		name   string
		change func(map[string]any)
		part   int32
		code   int
	}{
		{"dot-dot up and out", logOf(s.dir + "/../../../../etc/passwd"), 0, http.StatusForbidden},
		{"dot-dot back in", logOf(s.dir + "/../orders-0/" + kafkalog.FileName(0, kafkalog.LogSuffix)), 0, http.StatusForbidden},
		{"dot element", logOf(s.dir + "/./" + kafkalog.FileName(0, kafkalog.LogSuffix)), 0, http.StatusForbidden},
		{"relative", logOf("orders-0/" + kafkalog.FileName(0, kafkalog.LogSuffix)), 0, http.StatusForbidden},
		{"outside the log dirs", logOf(secret), 0, http.StatusForbidden},
		{"a partition dir outside the log dirs", logOf(filepath.Join(outside, "orders-0", kafkalog.FileName(0, kafkalog.LogSuffix))), 0, http.StatusForbidden},
		{"a partition dir that links out", logOf(filepath.Join(r.logDir, "orders-5", kafkalog.FileName(0, kafkalog.LogSuffix))), 5, http.StatusForbidden},
		{"a segment file that links out", logOf(filepath.Join(linked, kafkalog.FileName(0, kafkalog.LogSuffix))), 6, http.StatusForbidden},
		{"another partition's file", logOf(other.file(kafkalog.LogSuffix)), 0, http.StatusForbidden},
		{"another segment's file", logOf(later), 0, http.StatusForbidden},
		{"the index as the log", logOf(s.file(kafkalog.IndexSuffix)), 0, http.StatusForbidden},
		{"the log as the index", func(q map[string]any) { q["offsetIndex"] = s.file(kafkalog.LogSuffix) }, 0, http.StatusForbidden},
		{"another partition's snapshot", func(q map[string]any) { q["producerSnapshot"] = other.snapPath }, 0, http.StatusForbidden},
		{"a transaction index elsewhere", func(q map[string]any) { q["transactionIndex"] = secret }, 0, http.StatusForbidden},
		{"a file the broker removed", logOf(filepath.Join(s.dir, kafkalog.FileName(0, kafkalog.LogSuffix)) + ".gone"), 0, http.StatusForbidden},
		{"a log that does not exist", logOf(filepath.Join(r.logDir, "orders-9", kafkalog.FileName(0, kafkalog.LogSuffix))), 9, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := map[string]any{}
			for k, v := range s.req {
				q[k] = v
			}
			tc.change(q)
			c := s.name
			c.tp.Partition = tc.part
			c.id = remotelog.NewSegmentID()
			b, _ := json.Marshal(q)
			path := (&seg{name: c}).path()
			a := r.do(http.MethodPut, path, bytes.NewReader(b), "-")
			if a.code != tc.code {
				t.Errorf("%d %s; want %d", a.code, a.body, tc.code)
			}
			if strings.Contains(string(a.body), "not inside rsm.log_dirs") && strings.Count(string(a.body), r.logDir) > 1+strings.Count(q["logSegment"].(string), r.logDir) {
				t.Errorf("the log dir named more than once: %s", a.body)
			}
			nothingStored(t, r)
		})
	}
}

func TestMalformedRequests(t *testing.T) {
	r := newRig(t)
	s := r.layout(fixSmall, remotelog.TopicPartition{Topic: "orders", Partition: 0})
	r.copy(s)
	id := s.name.id.String()
	for _, tc := range []struct {
		method, path string
		hdr          []string
		code         int
	}{
		{http.MethodGet, "/v1/segments/orders/0/0/" + id + "x/log", nil, 400},
		{http.MethodGet, "/v1/segments/orders/0/0/" + id[:21] + "/log", nil, 400},
		{http.MethodGet, "/v1/segments/orders/0/0/" + id[:21] + "!/log", nil, 400},
		{http.MethodGet, "/v1/segments/orders/00/0/" + id + "/log", nil, 400},
		{http.MethodGet, "/v1/segments/orders/-1/0/" + id + "/log", nil, 400},
		{http.MethodGet, "/v1/segments/orders/0/00/" + id + "/log", nil, 400},
		{http.MethodGet, "/v1/segments/orders/0/+0/" + id + "/log", nil, 400},
		{http.MethodGet, "/v1/segments/orders/0/-5/" + id + "/log", nil, 400},
		{http.MethodGet, "/v1/segments/orders/2147483648/0/" + id + "/log", nil, 400},
		{http.MethodGet, "/v1/segments/orders/0/9223372036854775808/" + id + "/log", nil, 400},
		{http.MethodGet, "/v1/segments/or%2Fders/0/0/" + id + "/log", nil, 400},
		{http.MethodGet, "/v1/segments/or%20ders/0/0/" + id + "/log", nil, 400},
		{http.MethodGet, "/v1/segments/" + strings.Repeat("t", 250) + "/0/0/" + id + "/log", nil, 400},
		{http.MethodGet, s.path() + "/index/offset", nil, 400},
		{http.MethodGet, s.path() + "/index/TXN", nil, 400},
		{http.MethodGet, s.path() + "/log", []string{"Range", "bytes=5-2"}, 400},
		{http.MethodGet, s.path() + "/log", []string{"Range", "bytes=-5"}, 400},
		{http.MethodGet, s.path() + "/log", []string{"Range", "bytes=0-1,4-5"}, 400},
		{http.MethodGet, s.path() + "/log", []string{"Range", "bytes=x-"}, 400},
		{http.MethodGet, s.path() + "/log", []string{"Range", "items=0-"}, 400},
		{http.MethodGet, s.path() + "/log", []string{"Range", "bytes=01-"}, 400},
		{http.MethodPost, s.path(), nil, 400},
		{http.MethodGet, "/v2/health", nil, 400},
	} {
		a := r.do(tc.method, tc.path, nil, "-", tc.hdr...)
		if a.code != tc.code || a.reason() == "" {
			t.Errorf("%s %s %v: %d %s; want %d with a reason", tc.method, tc.path, tc.hdr, a.code, a.body, tc.code)
		}
	}
}

func TestMalformedCopies(t *testing.T) {
	r := newRig(t)
	s := r.layout(fixSmall, remotelog.TopicPartition{Topic: "orders", Partition: 0})
	with := func(k string, v any) []byte {
		q := map[string]any{}
		for k, v := range s.req {
			q[k] = v
		}
		if v == nil {
			delete(q, k)
		} else {
			q[k] = v
		}
		b, _ := json.Marshal(q)
		return b
	}
	frame := func(head []byte, rest ...[]byte) []byte {
		var b bytes.Buffer
		binary.Write(&b, binary.BigEndian, uint32(len(head)))
		b.Write(head)
		for _, x := range rest {
			b.Write(x)
		}
		return b.Bytes()
	}
	up := s.uploadBody()
	for _, tc := range []struct {
		name   string
		body   []byte
		ctype  string
		code   int
		reason string
	}{
		{"not JSON", []byte("{"), "application/json", 400, "INVALID_ARGUMENT"},
		{"two objects", append(with("x", nil), []byte("{}")...), "application/json", 400, "INVALID_ARGUMENT"},
		{"a JSON body over 1 MiB", with("pad", strings.Repeat("x", 1<<20)), "application/json", 413, "TOO_LARGE"},
		{"no topic id", with("topicId", nil), "", 400, "INVALID_ARGUMENT"},
		{"a bad topic id", with("topicId", "nope"), "", 400, "INVALID_ARGUMENT"},
		{"an end before the start", with("endOffset", -1), "", 400, "INVALID_ARGUMENT"},
		{"no size", with("segmentSizeInBytes", nil), "", 400, "INVALID_ARGUMENT"},
		{"a size that is not the file's", with("segmentSizeInBytes", len(s.log)+1), "", 400, "INVALID_ARGUMENT"},
		{"no epochs", with("segmentLeaderEpochs", []any{}), "", 400, "INVALID_ARGUMENT"},
		{"epochs out of order", with("segmentLeaderEpochs", []map[string]int{{"epoch": 3, "startOffset": 0}, {"epoch": 1, "startOffset": 5}}), "", 400, "INVALID_ARGUMENT"},
		{"no checkpoint", with("leaderEpochCheckpoint", nil), "", 400, "INVALID_ARGUMENT"},
		{"a checkpoint not in base64", with("leaderEpochCheckpoint", "***"), "", 400, "INVALID_ARGUMENT"},
		{"no log path", with("logSegment", nil), "", 400, "INVALID_ARGUMENT"},
		{"another content type", with("x", nil), "text/plain", 400, "INVALID_ARGUMENT"},
		{"upload: empty", nil, UploadContentType, 400, "INVALID_ARGUMENT"},
		{"upload: head over 1 MiB", frame(make([]byte, 1<<20+1)), UploadContentType, 413, "TOO_LARGE"},
		{"upload: head cut short", up[:20], UploadContentType, 400, "INVALID_ARGUMENT"},
		{"upload: body cut short", up[:len(up)-3], UploadContentType, 400, "INVALID_ARGUMENT"},
		{"upload: bytes after the files", append(append([]byte{}, up...), 1, 2, 3), UploadContentType, 400, "INVALID_ARGUMENT"},
		{"upload: sizes too short", s.uploadBody(int64(len(s.log) - 10)), UploadContentType, 400, "INVALID_ARGUMENT"},
		{"upload: sizes too long", s.uploadBody(int64(len(s.log) + 10)), UploadContentType, 400, "INVALID_ARGUMENT"},
		{"upload: a negative size", s.uploadBody(-1), UploadContentType, 400, "INVALID_ARGUMENT"},
		{"upload: a log over 2 GiB", s.uploadBody(1 << 31), UploadContentType, 413, "TOO_LARGE"},
		{"upload: sizes absent", frame(with("x", nil), s.log), UploadContentType, 400, "INVALID_ARGUMENT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := s.name
			c.id = remotelog.NewSegmentID()
			var hdr []string
			if tc.ctype != "" {
				hdr = []string{"Content-Type", tc.ctype}
			}
			a := r.do(http.MethodPut, (&seg{name: c}).path(), bytes.NewReader(tc.body), "-", hdr...)
			if a.code != tc.code || a.reason() != tc.reason {
				t.Errorf("%d %s; want %d %s", a.code, a.body, tc.code, tc.reason)
			}
			nothingStored(t, r)
		})
	}
	if ents, _ := os.ReadDir(r.cfg.StagingDir); len(ents) != 0 {
		t.Errorf("the staging dir holds %d entries after refused uploads", len(ents))
	}
}

func TestCorruptSegment(t *testing.T) {
	r := newRig(t)
	s := r.layout(fixOffsets, remotelog.TopicPartition{Topic: "orders", Partition: 0})
	bad := append([]byte{}, s.log...)
	bad[5000] ^= 0xff // inside a batch past the first
	if err := os.WriteFile(s.file(kafkalog.LogSuffix), bad, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"path", "upload"} {
		s.log = bad
		var a answer
		if mode == "path" {
			a = r.do(http.MethodPut, s.path(), s.body(), "-")
		} else {
			a = r.do(http.MethodPut, s.path(), bytes.NewReader(s.uploadBody()), "-", "Content-Type", UploadContentType)
		}
		if a.code != http.StatusUnprocessableEntity || a.reason() != "CORRUPT_SEGMENT" || !strings.Contains(string(a.body), "byte ") ||
			!strings.Contains(string(a.body), kafkalog.FileName(0, kafkalog.LogSuffix)) {
			t.Errorf("copy by %s of a corrupt segment: %d %s; want 422 CORRUPT_SEGMENT naming the file and the byte", mode, a.code, a.body)
		}
		nothingStored(t, r)
	}
}

func TestTieredBySidecar(t *testing.T) {
	r := newRig(t, withOptions(WithSidecarTopics(func(topic string) bool { return topic == "tiered-by-tierd" })))
	s := r.layout(fixSmall, remotelog.TopicPartition{Topic: "tiered-by-tierd", Partition: 0})
	a := r.do(http.MethodPut, s.path(), s.body(), "-")
	if a.code != http.StatusConflict || a.reason() != "TIERED_BY_SIDECAR" {
		t.Errorf("copy of a topic tierd's copier tiers: %d %s; want 409 TIERED_BY_SIDECAR", a.code, a.body)
	}
	nothingStored(t, r)
}
