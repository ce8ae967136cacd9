// Package lint checks, as a test, the rules of the code base that the
// compiler does not: which packages may import which, no global metric
// registration, and file length.
package lint

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/tierd/tierd"

// packageImports maps each package of the module to its direct imports.
func packageImports(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"/...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	res := map[string][]string{}
	s := bufio.NewScanner(bytes.NewReader(out))
	for s.Scan() {
		f := strings.Fields(s.Text())
		res[f[0]] = f[1:]
	}
	return res
}

func rel(p string) string { return strings.TrimPrefix(strings.TrimPrefix(p, module), "/") }

func isStdlib(p string) bool { return !strings.Contains(strings.SplitN(p, "/", 2)[0], ".") }

// TestImportLayers enforces the layering: Kafka format code (and
// Kafka's ACL rules, internal/kafkaacl) imports only the standard library
// and itself; authz (the ACLs in force) imports none of the parts that
// may feed it; rsm, rlmm and cluster never import each
// other; the remote read engine (remoteread) sits below its gRPC edge
// (grpcapi) and imports no gRPC; copier, grpcapi and the RSM endpoint
// (rsmapi) never import each other, and the copier not the read engine;
// the Kafka listener imports none of the parts it serves from (it owns
// its Log interface); config (tierd.yaml) sits above the packages whose
// Config it holds and below cmd/; nothing imports cmd/;
// the copier's pure planners (copier/retention) import only the standard
// library and the shared types and helpers, so they stay free of stores
// and buckets, its per-topic settings (copier/topics) import only the
// cluster's config values, and its deleter (copier/deleter) and remote compaction
// (copier/remotecompact) reach the store and the bucket (and remote
// compaction the delete protocol) only through their own interfaces;
// lower layers never import higher ones.
func TestImportLayers(t *testing.T) {
	layer := func(p string) int {
		switch r := rel(p); {
		case strings.HasPrefix(r, "cmd/"), r == "logview", r == "daemon", strings.HasPrefix(r, "daemon/"):
			return 7 // logview and daemon (with daemon/statuspage) are parts of tierd run kept in their own packages; the bench is cmd/tierd/internal/bench
		case r == "config":
			return 6 // tierd.yaml: the sections are the Config types of the layers below
		case r == "copier" || strings.HasPrefix(r, "copier/") || r == "grpcapi" || strings.HasPrefix(r, "grpcapi/"),
			r == "listener" || strings.HasPrefix(r, "listener/"), r == "rsmapi":
			return 5
		case r == "remoteread" || strings.HasPrefix(r, "remoteread/"):
			return 4 // the read engine, below its edges (grpcapi, logview's Kafka)
		case r == "rsm" || strings.HasPrefix(r, "rsm/") || r == "rlmm" || strings.HasPrefix(r, "rlmm/"),
			r == "cluster" || strings.HasPrefix(r, "cluster/"), r == "authz":
			return 3
		case r == "seglog" || r == "locallog" || strings.HasPrefix(r, "internal/remotelog"):
			return 2
		case strings.HasPrefix(r, "internal/codec"):
			return 1
		case strings.HasPrefix(r, "internal/kafkalog"), r == "internal/kafkaacl":
			return 0
		}
		return -1 // proto, test helpers: checked separately
	}
	forbidden := map[string][]string{
		"rsm": {"rlmm", "cluster"}, "rlmm": {"rsm", "cluster"}, "cluster": {"rsm", "rlmm"},
		"copier": {"grpcapi", "listener", "rsmapi", "remoteread"}, "grpcapi": {"copier", "listener", "rsmapi"}, "rsmapi": {"copier", "grpcapi", "listener"},
		"remoteread": {"copier", "grpcapi", "listener", "rsmapi", "rlmm", "cluster"}, // rows come through its Metadata interface
		"listener":   {"copier", "grpcapi", "remoteread", "rsm", "rlmm", "cluster", "seglog", "locallog"},
		"authz":      {"cluster", "rsm", "rlmm"}, // its Source interface is its own: cmd/ hands it the cluster client
	}
	only := map[string][]string{ // besides the standard library
		"copier/retention": {"internal/remotelog", "internal/saturate"},
		"copier/topics":    {"cluster"},
		"copier/deleter":   {"copier/retention", "internal/crashpoint", "internal/remotelog", "rsm"},
		"copier/remotecompact": {"copier/deleter", "internal/codec", "internal/crashpoint", "internal/kafkalog", "internal/kafkalog/batch",
			"internal/kafkalog/compact", "internal/kafkalog/index", "internal/kafkalog/snapshot", "internal/remotelog", "rsm",
			"github.com/prometheus/client_golang/prometheus", "github.com/prometheus/client_golang/prometheus/promauto"},
	}
	for pkg, imps := range packageImports(t) {
		r := rel(pkg)
		for _, imp := range imps {
			if allowed, ok := only[r]; ok && !isStdlib(imp) && !slices.Contains(allowed, rel(imp)) {
				t.Errorf("%s imports %s: it imports only the standard library and %v", r, imp, allowed)
			}
			if !strings.HasPrefix(imp, module) {
				if (strings.HasPrefix(r, "internal/kafkalog") || r == "internal/kafkaacl") && !isStdlib(imp) {
					t.Errorf("%s imports %s: Kafka format code uses only the standard library", r, imp)
				}
				if (r == "remoteread" || strings.HasPrefix(r, "remoteread/")) && (imp == "google.golang.org/grpc" || strings.HasPrefix(imp, "google.golang.org/grpc/")) {
					t.Errorf("%s imports %s: the read engine speaks no gRPC; its gRPC edge is grpcapi", r, imp)
				}
				continue
			}
			ri := rel(imp)
			if strings.HasPrefix(ri, "cmd/") && !strings.HasPrefix(ri, r+"/internal/") {
				t.Errorf("%s imports %s: nothing imports cmd/ (but a command its own internal packages)", r, ri)
			}
			if strings.HasPrefix(r, "internal/kafkalog") && !strings.HasPrefix(ri, "internal/kafkalog") {
				t.Errorf("%s imports %s: Kafka format code imports only itself", r, ri)
			}
			if lp, li := layer(pkg), layer(imp); lp >= 0 && li > lp {
				t.Errorf("%s (layer %d) imports %s (layer %d): imports point down only", r, lp, ri, li)
			}
			top := strings.SplitN(r, "/", 2)[0]
			for _, f := range forbidden[top] {
				if ri == f || strings.HasPrefix(ri, f+"/") {
					t.Errorf("%s imports %s", r, ri)
				}
			}
		}
	}
}

// TestSourceRules: no global Prometheus registration, and Go files stay
// short enough to read (600 lines; tests 900).
func TestSourceRules(t *testing.T) {
	banned := []string{"prometheus.MustRegister(", "prometheus.DefaultRegisterer", "promauto.NewCounter", "promauto.NewGauge", "promauto.NewHistogram", "func init()"}
	err := filepath.WalkDir("../..", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, ".pb.go") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		test := strings.HasSuffix(p, "_test.go")
		limit := 600
		if test {
			limit = 900
		}
		if n := bytes.Count(data, []byte("\n")); n > limit {
			t.Errorf("%s: %d lines, over %d", p, n, limit)
		}
		if !test && !strings.Contains(p, "internal/lint") {
			for _, b := range banned {
				if bytes.Contains(data, []byte(b)) {
					t.Errorf("%s uses %s: inject registries and loggers", p, b)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
