package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestEveryCommandHelp: "tierd CMD -h" (and --help, and "tierd help
// CMD") prints the command's usage and exits 0, for every command in
// commands() and every verb of a command that takes one.
func TestEveryCommandHelp(t *testing.T) {
	var cases [][]string
	for _, c := range commands() {
		cases = append(cases, []string{c.name, "-h"}, []string{c.name, "--help"}, []string{"help", c.name})
	}
	for _, verb := range [][]string{{"topics", "delete"}, {"partitions", "restore"}, {"rlmm", "rebuild"}, {"sasl", "credential"}} {
		cases = append(cases, append(verb, "-h"))
	}
	for _, args := range cases {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, out, errOut := runCmd(args...)
			all := out + errOut
			name := args[0]
			if name == "help" {
				name = args[1]
			}
			if code != 0 || !strings.Contains(strings.ToLower(all), "usage") || !strings.Contains(all, name) {
				t.Errorf("exit %d, want 0 and a usage naming %q:\n%s", code, name, all)
			}
		})
	}
	if code, out, _ := runCmd("-h"); code != 0 || !strings.Contains(out, "version") || !strings.Contains(out, "verify") {
		t.Errorf("tierd -h: exit %d\n%s", code, out)
	}
}

// TestVersion builds the tierd binary and checks that "tierd version"
// names the Git revision of this checkout (when the tree is one and git is
// installed) and the Go version; under go test the revision is unknown.
func TestVersion(t *testing.T) {
	code, out, _ := runCmd("version")
	if code != 0 || !strings.HasPrefix(out, "tierd ") || !strings.Contains(out, runtime.Version()) {
		t.Fatalf("version in the test binary: exit %d %q", code, out)
	}
	if code, _, _ := runCmd("version", "extra"); code != 2 {
		t.Errorf("version with an argument: exit %d", code)
	}
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	head, err := exec.Command(git, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "tierd")
	// -buildvcs=true: this machine's go env may turn stamping off, as
	// make build overrides too.
	if out, err := exec.CommandContext(ctx, "go", "build", "-buildvcs=true", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	got, err := exec.CommandContext(ctx, bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(got), "revision unknown") && os.Getenv("CI") == "" {
		// Go stamps nothing in some checkouts (a git worktree, whose .git
		// is a file); CI's fresh clone is stamped.
		t.Skipf("go stamped no VCS information in this checkout: %q", got)
	}
	re := regexp.MustCompile(`^tierd \S+ \(revision ` + strings.TrimSpace(string(head)) + `(, modified)?, \d{4}-\d\d-\d\dT[0-9:]+Z\) go\S+ \S+/\S+\n$`)
	if !re.Match(got) {
		t.Errorf("tierd version = %q, want the revision %s", got, strings.TrimSpace(string(head)))
	}
}
