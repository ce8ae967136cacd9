package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: tierd version")
		fmt.Fprintln(stderr, "\nPrints the module version, the VCS revision and commit time the binary was")
		fmt.Fprintln(stderr, "built from (\"modified\" when the work tree had changes), and the Go version.")
	}
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	fmt.Fprintln(stdout, versionLine(debug.ReadBuildInfo()))
	return 0
}

// versionLine describes a build from its build info (runtime/debug):
// "tierd <module version> (revision <vcs.revision>[, modified], <vcs.time>)
// <go version> <os>/<arch>". The module version is "(devel)" for a build
// from a checkout; the revision is "unknown" when the binary carries none
// (go run, go test, a build outside a git checkout or with -buildvcs=false).
func versionLine(info *debug.BuildInfo, ok bool) string {
	version, rev, when, modified := "unknown", "unknown", "", false
	if ok {
		version = info.Main.Version
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	vcs := []string{"revision " + rev}
	if modified {
		vcs = append(vcs, "modified")
	}
	if when != "" {
		vcs = append(vcs, when)
	}
	return fmt.Sprintf("tierd %s (%s) %s %s/%s", version, strings.Join(vcs, ", "), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
