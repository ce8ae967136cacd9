package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/tierd/tierd/grpcapi"
)

const apiUsage = `usage: tierd api token --principal User:NAME --token-file F

Makes a bearer token for the gRPC API (fetch.listen): 32 random bytes, written to
--token-file (created with mode 0600; an existing file is refused), which a tool uses
as fetch.client.token_file. Prints the line to add to the server's fetch.tokens_file:
the principal and the token's SHA-256, never the token.`

// runAPI is "tierd api token".
func runAPI(_ context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprintln(stdout, apiUsage)
		return 0
	}
	if len(args) == 0 || args[0] != "token" {
		fmt.Fprintln(stderr, apiUsage)
		return 2
	}
	fs := flag.NewFlagSet("api token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	principal := fs.String("principal", "", "the principal the token stands for, e.g. User:ops")
	file := fs.String("token-file", "", "where to write the token (mode 0600, must not exist)")
	fs.Usage = func() { fmt.Fprintln(stderr, apiUsage); fs.PrintDefaults() }
	if err := fs.Parse(args[1:]); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2
	}
	if i := strings.IndexByte(*principal, ':'); i <= 0 || i == len(*principal)-1 || strings.ContainsAny(*principal, " \t\r\n") {
		if *principal == "" {
			fmt.Fprintln(stderr, "tierd api token: --principal is required, e.g. User:ops")
		} else {
			fmt.Fprintf(stderr, "tierd api token: --principal %q: want <type>:<name> without blanks, e.g. User:ops\n", *principal)
		}
		return 2
	}
	if *file == "" {
		fmt.Fprintln(stderr, "tierd api token: --token-file is required")
		return 2
	}
	var b [32]byte
	rand.Read(b[:])
	tok := base64.RawURLEncoding.EncodeToString(b[:])
	f, err := os.OpenFile(*file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		fmt.Fprintf(stderr, "tierd api token: %v\n", err)
		return 1
	}
	if _, err := fmt.Fprintln(f, tok); err != nil {
		f.Close()
		os.Remove(*file)
		fmt.Fprintf(stderr, "tierd api token: %v\n", err)
		return 1
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		os.Remove(*file)
		fmt.Fprintf(stderr, "tierd api token: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, grpcapi.TokenLine(*principal, tok))
	return 0
}
