package testtools

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// SkipReportEnv names the file ("make unit" sets it) to which Skip
// appends one line per skip, so that skips show in a run that prints only
// "ok" for passing packages.
const SkipReportEnv = "TIERD_SKIP_REPORT"

// Skip skips the test, saying why and what to install, and, when
// $TIERD_SKIP_REPORT names a file, appends "skipped: <why> (install
// <install>)" to it (best effort).
func Skip(t testing.TB, why, install string) {
	t.Helper()
	line := fmt.Sprintf("skipped: %s (install %s)", why, install)
	if p := os.Getenv(SkipReportEnv); p != "" {
		if f, err := os.OpenFile(p, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintln(f, line)
			f.Close()
		}
	}
	t.Skip(line)
}

// Python is the interpreter the Python Kafka clients' tests run.
const Python = "/usr/bin/python3"

// Kcat returns the path of kcat (librdkafka's command-line client), or
// skips the test (see Skip): CI installs it (.ci/run).
func Kcat(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("kcat")
	if err != nil {
		Skip(t, "Kafka client tests that need kcat: it is not on PATH", "the Debian package kcat")
	}
	return p
}

// NeedPython skips the test (see Skip) unless Python and its module
// (kafka for kafka-python, confluent_kafka) are installed; CI installs
// both (.ci/run).
func NeedPython(t testing.TB, module string) {
	t.Helper()
	pkg := map[string]string{"kafka": "python3-kafka", "confluent_kafka": "python3-confluent-kafka"}[module]
	if pkg == "" {
		pkg = "python3-" + module
	}
	if _, err := os.Stat(Python); err != nil {
		Skip(t, "Kafka client tests that need "+Python+": it is missing", "the Debian package "+pkg)
	}
	if out, err := exec.Command(Python, "-c", "import "+module).CombinedOutput(); err != nil {
		lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
		Skip(t, fmt.Sprintf("Kafka client tests that need the python module %s: %s", module, lines[len(lines)-1]), "the Debian package "+pkg)
	}
}
