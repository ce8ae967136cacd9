package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/tierd/tierd/config"
)

// configCommand parses a subcommand's "--config FILE" (and the flags setup
// adds) and loads the config. When ok is false the command ends with code
// (0 after -h, 2 for usage errors, 1 for a bad config), the reason already
// printed to stderr.
func configCommand(name, usage string, args []string, stderr io.Writer, setup func(*flag.FlagSet)) (cfg config.Config, code int, ok bool) {
	return configCommandArgs(name, usage, args, stderr, setup, nil)
}

// configCommandArgs is configCommand for a subcommand that takes
// positional arguments after its flags: they are stored in *rest (nil
// rest: none allowed).
func configCommandArgs(name, usage string, args []string, stderr io.Writer, setup func(*flag.FlagSet), rest *[]string) (cfg config.Config, code int, ok bool) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "path of the YAML config file (required); see tierd.example.yaml")
	if setup != nil {
		setup(fs)
	}
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: "+usage)
		fs.PrintDefaults()
	}
	// Flags may come before and after positional arguments
	// ("topics delete orders --config tierd.yaml").
	var positional []string
	for {
		if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
			return cfg, 0, false
		} else if err != nil {
			return cfg, 2, false
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if *path == "" || (rest == nil && len(positional) > 0) {
		fmt.Fprintln(stderr, "usage: "+usage)
		return cfg, 2, false
	}
	if rest != nil {
		*rest = positional
	}
	cfg, err := config.Load(*path)
	if err != nil {
		fmt.Fprintf(stderr, "tierd %s: %v\n", name, err)
		return cfg, 1, false
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintf(stderr, "tierd %s: warning: %s: %s\n", name, *path, w)
	}
	return cfg, 0, true
}
