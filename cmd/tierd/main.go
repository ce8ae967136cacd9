// Command tierd is the tiered-storage daemon for Kafka-format logs and its
// tools. Run "tierd help" for the subcommands.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// command is one subcommand: it parses its own flags from args.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
	// graceful: SIGINT/SIGTERM cancel ctx instead of ending the process,
	// and SIGHUP does not end it (see watchSIGHUP).
	graceful bool
}

func commands() []command {
	return []command{
		{"demo", "run the reference scenario end to end on an embedded default (or --s3-endpoint)", runDemo, true},
		{"run", "run the daemon: copy rolled segments, apply retention, serve remote fetches", runRun, true},
		{"segments", "list the local and remote segments of a running or stopped tierd, and pending deletions", runSegments, false},
		{"status", "what tiering of each partition is doing and why (copying, up to date, waiting and the reason), and the consumer groups tierd coordinates", runStatus, false},
		{"journal", "print the journal of whole-partition deletions (JSON lines)", runJournal, false},
		{"topics", "topics delete TOPIC: schedule the deletion of a topic's remote copies (after the grace period)", runTopics, true},
		{"partitions", "partitions restore TOPIC-P: cancel a scheduled deletion within its grace period", runPartitions, true},
		{"rlmm", "rlmm rebuild: restore the remote metadata from the bucket's manifests (tierd stopped)", runRlmm, true},
		{"bench", "measure remote-read latency and throughput against MinIO (started here, or --s3-endpoint)", runBench, true},
		{"bucket", "bucket create: create the configured bucket (a directory, or a bucket on MinIO or S3)", runBucket, true},
		{"dump", "print .log batches, index, snapshot and checkpoint file entries as JSON lines", runDump, false},
		{"keys", "keys new FILE: a new key-encryption key; keys rewrap: move encrypted copies' data keys to objects.encryption.key.id", runKeys, true},
		{"verify", "re-read finished copies (all or --sample N) and check them against their manifest checksums", runVerify, true},
		{"version", "print the module version, VCS revision and Go version of this binary", runVersion, false},
		{"api", "api token --principal User:NAME --token-file F: a bearer token for the gRPC API and its tokens_file line", runAPI, false},
		{"sasl", "sasl credential --user NAME: a credentials-file line for the Kafka listener's SASL logins (password on stdin)", runSASL, false},
		{"config", "config show: every setting and its source; config reload: apply a running tierd's dynamic settings", runConfig, false},
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: tierd <command> [flags] [args]")
	fmt.Fprintln(w, "\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun \"tierd <command> -h\" for a command's flags.")
}

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to a subcommand and returns the process exit code:
// 0 success, 1 failure, 2 usage error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 2 && args[0] == "help" {
		args = []string{args[1], "-h"} // "tierd help dump" = "tierd dump -h"
	}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			if c.graceful {
				var stop context.CancelFunc
				ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
				defer stop()
				if c.name != "run" { // run's serve catches SIGHUP itself, to reload
					if _, isFile := stderr.(*os.File); !isFile { // a file takes concurrent writes (and may be a terminal)
						stderr = &lockedWriter{w: stderr} // the command and the watcher both write it
					}
					defer watchSIGHUP(stderr)()
				}
			}
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "tierd: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}
