package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/tierd/tierd/listener/sasl"
)

const saslUsage = `usage: tierd sasl credential --user NAME [--mechanism SCRAM-SHA-256|SCRAM-SHA-512] [--iterations N] [--password-file F]

Prints a line of the Kafka listener's credentials file (kafka.sasl.credentials.file)
for the user: the SCRAM credential of the password (salt, stored key, server key,
iterations, as Kafka stores it), never the password. The password is the first line of
--password-file, or of standard input ("-", the default).`

// runSASL is "tierd sasl credential".
func runSASL(_ context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprintln(stdout, saslUsage)
		return 0
	}
	if len(args) == 0 || args[0] != "credential" {
		fmt.Fprintln(stderr, saslUsage)
		return 2
	}
	fs := flag.NewFlagSet("sasl credential", flag.ContinueOnError)
	fs.SetOutput(stderr)
	user := fs.String("user", "", "the user's name")
	mech := fs.String("mechanism", sasl.ScramSHA512, "SCRAM-SHA-256 or SCRAM-SHA-512")
	iters := fs.Int("iterations", 8192, fmt.Sprintf("iterations, %d to %d", sasl.MinIterations, sasl.MaxIterations))
	pwFile := fs.String("password-file", "-", `the file whose first line is the password; "-" for standard input`)
	fs.Usage = func() { fmt.Fprintln(stderr, saslUsage); fs.PrintDefaults() }
	if err := fs.Parse(args[1:]); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2
	}
	switch {
	case *user == "":
		fmt.Fprintln(stderr, "tierd sasl credential: --user is required")
		return 2
	case strings.ContainsAny(*user, " \t\r\n"):
		fmt.Fprintf(stderr, "tierd sasl credential: --user %q has a blank: the credentials file separates fields with blanks\n", *user)
		return 2
	}
	var in io.Reader = os.Stdin
	if *pwFile != "-" {
		f, err := os.Open(*pwFile)
		if err != nil {
			fmt.Fprintf(stderr, "tierd sasl credential: %v\n", err)
			return 1
		}
		defer f.Close()
		in = f
	}
	line, err := bufio.NewReader(in).ReadString('\n')
	pw := strings.TrimRight(line, "\r\n")
	if pw == "" {
		why := "its first line is empty"
		if err != nil && err != io.EOF {
			why = err.Error()
		}
		fmt.Fprintf(stderr, "tierd sasl credential: no password read from %s: %s\n", *pwFile, why)
		return 1
	}
	c, err := sasl.NewCredential(strings.ToUpper(*mech), pw, *iters)
	if err != nil {
		fmt.Fprintf(stderr, "tierd sasl credential: %v\n", err)
		return 2
	}
	fmt.Fprintln(stdout, sasl.FormatLine(*user, strings.ToUpper(*mech), c))
	return 0
}
