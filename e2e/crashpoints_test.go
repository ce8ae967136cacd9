package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestEveryCrashPointIsAimedAt reads the module's code for the named crash
// points (crashpoint.Hit with a literal name, or a Crash* constant passed
// to it) and fails for any that no crash test aims at: not in the lists of
// TestCrash, TestCrashLeader, TestCrashRemoteCompaction, TestCrashChunked
// or TestCrashRewrap, and not named
// (by its literal or its constant) in another *crash_test.go file. A step
// added to the code without a kill aimed at it would otherwise go
// unproven.
func TestEveryCrashPointIsAimedAt(t *testing.T) {
	t.Parallel()
	hitLit := regexp.MustCompile(`crashpoint\.Hit\("([^"]+)"\)`)
	hitConst := regexp.MustCompile(`crashpoint\.Hit\((Crash\w+)\)`)
	constDef := regexp.MustCompile(`(Crash\w+)\s*=\s*"([^"]+)"`)
	points := map[string]string{} // name -> the constant that holds it ("" for a literal)
	consts := map[string]string{}
	var crashTests []string
	err := filepath.WalkDir("..", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "kafka-rsm") && p != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		src := string(b)
		if strings.HasSuffix(p, "crash_test.go") {
			crashTests = append(crashTests, src)
		}
		if strings.HasSuffix(p, "_test.go") {
			return nil
		}
		for _, m := range constDef.FindAllStringSubmatch(src, -1) {
			consts[m[1]] = m[2]
		}
		for _, m := range hitLit.FindAllStringSubmatch(src, -1) {
			points[m[1]] = ""
		}
		for _, m := range hitConst.FindAllStringSubmatch(src, -1) {
			points["const:"+m[1]] = m[1]
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(points) < 20 {
		t.Fatalf("found only %d crash points in the code: the patterns no longer match it", len(points))
	}
	aimed := slices.Concat(crashPoints, leaderCrashPoints, compactCrashPoints, chunkedCrashPoints, rewrapCrashPoints)
	for name, cst := range points {
		if cst != "" {
			if name = consts[cst]; name == "" {
				t.Errorf("crash point constant %s: no definition found", cst)
				continue
			}
		}
		if slices.Contains(aimed, name) {
			continue
		}
		found := false
		for _, src := range crashTests {
			if strings.Contains(src, `"`+name+`"`) {
				found = true
			}
			for c, v := range consts {
				if v == name && strings.Contains(src, c) {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("crash point %q is in the code but no crash test aims at it", name)
		}
	}
}
