package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/tierd/tierd/daemon"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/chunked"
)

const keysUsage = "tierd keys new FILE | tierd keys rewrap --config tierd.yaml [--dry-run]"

// runKeys is "tierd keys": new writes a new key-encryption key (KEK)
// file; rewrap moves every encrypted copy's data key to the current KEK
// (objects.encryption.key.id), so that older KEKs can be removed.
func runKeys(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprintln(stdout, "usage: "+keysUsage)
		return 0
	}
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: "+keysUsage)
		return 2
	}
	switch args[0] {
	case "new":
		if len(args) == 2 && (args[1] == "-h" || args[1] == "--help") {
			fmt.Fprintln(stdout, "usage: tierd keys new FILE: writes a new key-encryption key (32 random bytes, as 64 hex digits) to the new file FILE, mode 0600")
			return 0
		}
		if len(args) != 2 || strings.HasPrefix(args[1], "-") {
			fmt.Fprintln(stderr, "usage: tierd keys new FILE")
			return 2
		}
		if err := newKEKFile(args[1]); err != nil {
			fmt.Fprintf(stderr, "tierd keys new: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "wrote a new key-encryption key to %s (mode 0600); list it in objects.encryption.keys under an id of your choice, "+
			"and back it up: copies wrapped by it cannot be read without it\n", args[1])
		return 0
	case "rewrap":
		return runRewrap(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintln(stderr, "usage: "+keysUsage)
	return 2
}

// newKEKFile writes 32 random bytes, as 64 hex digits and a newline, to a
// new file of mode 0600 (an existing file is never overwritten).
func newKEKFile(p string) error {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(hex.EncodeToString(k) + "\n")
	clear(k)
	if err = errors.Join(err, f.Sync(), f.Close()); err != nil {
		os.Remove(p)
	}
	return err
}

// runRewrap is "tierd keys rewrap": every manifest under bucket.prefix
// (tierd's own copies) is read, and an encrypted copy's data key under
// another KEK than the current is wrapped again under the current one
// (rsm.Manager.Rewrap: the manifest's envelope only, no data rewritten,
// written only if unchanged since read). It runs beside a running
// tierd. It reports the copies by KEK before and after, and which KEKs
// no copy needs any more.
func runRewrap(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var dryRun bool
	cfg, code, ok := configCommand("keys rewrap", "tierd keys rewrap --config tierd.yaml [--dry-run]", args, stderr, func(fs *flag.FlagSet) {
		fs.BoolVar(&dryRun, "dry-run", false, "count the copies by KEK and say what a rewrap would move; write nothing")
	})
	if !ok {
		return code
	}
	if cfg.Objects.CurrentKeyID() == "" {
		fmt.Fprintln(stderr, "tierd keys rewrap: objects.encryption.key.id names no key: set it to the KEK the copies move to")
		return 1
	}
	b, err := daemon.OpenBucket(ctx, cfg.Bucket)
	if err != nil {
		fmt.Fprintf(stderr, "tierd keys rewrap: %v\n", err)
		return 1
	}
	defer b.Close()
	if err := checkBucket(ctx, b, cfg.Bucket.Prefix); err != nil {
		fmt.Fprintf(stderr, "tierd keys rewrap: %v\n", err)
		return 1
	}
	mc, err := daemon.ManagerConfig(cfg.Objects, cfg.Bucket.Prefix)
	if err != nil {
		fmt.Fprintf(stderr, "tierd keys rewrap: %v\n", err)
		return 1
	}
	m, err := rsm.NewManager(b, mc)
	if err != nil {
		fmt.Fprintf(stderr, "tierd keys rewrap: %v\n", err)
		return 1
	}
	r, err := rewrapAll(ctx, m, cfg.Objects.CurrentKeyID(), dryRun, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "tierd keys rewrap: %v\n", err)
		return 1
	}
	r.print(stdout, cfg.Objects.CurrentKeyID(), slices.Sorted(maps.Keys(cfg.Objects.EncryptionKeys)), dryRun)
	if r.failed > 0 {
		return 1
	}
	return 0
}

// rewrapReport counts a rewrap's copies.
type rewrapReport struct {
	before, after map[string]int // encrypted copies by KEK
	plain         int            // copies not encrypted
	moved, gone   int
	failed        int
	keyless       bool // some failed for want of their KEK
}

// rewrapAll runs Rewrap (or, dry, ReadManifest) on every manifest of m's
// partitions. A manifest that fails is reported on stderr and counted;
// the rest go on. Errors: listing the bucket.
func rewrapAll(ctx context.Context, m *rsm.Manager, current string, dry bool, stderr io.Writer) (*rewrapReport, error) {
	r := &rewrapReport{before: map[string]int{}, after: map[string]int{}}
	noteKey := func(err error) {
		r.keyless = r.keyless || errors.Is(err, chunked.ErrKeyUnavailable) || errors.Is(err, chunked.ErrWrongKey)
	}
	tps, err := m.Partitions(ctx)
	if err != nil {
		return nil, err
	}
	for _, tp := range tps {
		var keys []string
		if err := m.Bucket().Iter(ctx, m.PartitionPrefix(tp), func(k string) error {
			if strings.HasSuffix(k, rsm.ManifestSuffix) {
				keys = append(keys, k)
			}
			return nil
		}); err != nil {
			return nil, err
		}
		for _, k := range keys {
			if dry {
				mf, err := m.ReadManifest(ctx, k)
				switch {
				case err != nil:
					r.failed++
					noteKey(err)
					fmt.Fprintf(stderr, "%v\n", err)
				case mf.Encryption == nil:
					r.plain++
				default:
					r.before[mf.Encryption.KEKID]++
					r.after[current]++
				}
				continue
			}
			res, err := m.Rewrap(ctx, k)
			switch {
			case errors.Is(err, rsm.ErrNotFound), errors.Is(err, rsm.ErrPreconditionFailed):
				r.gone++ // deleted, or rewritten by another writer, meanwhile
				fmt.Fprintf(stderr, "%s changed or went while it was rewrapped; left as it is: %v\n", k, err)
			case err != nil:
				r.failed++
				noteKey(err)
				if res.From != "" {
					r.before[res.From]++
					r.after[res.From]++
				}
				fmt.Fprintf(stderr, "%v\n", err)
			case res.From == "":
				r.plain++
			default:
				r.before[res.From]++
				r.after[res.To]++
				if res.Changed {
					r.moved++
				}
			}
		}
	}
	return r, nil
}

func (r *rewrapReport) print(w io.Writer, current string, configured []string, dry bool) {
	show := func(m map[string]int) string {
		if len(m) == 0 {
			return "none"
		}
		var parts []string
		for _, id := range slices.Sorted(maps.Keys(m)) {
			parts = append(parts, fmt.Sprintf("%s %d", id, m[id]))
		}
		return strings.Join(parts, ", ")
	}
	fmt.Fprintf(w, "encrypted copies by key-encryption key: before %s; %s %s\n", show(r.before), map[bool]string{true: "after a rewrap", false: "now"}[dry], show(r.after))
	verb := "moved"
	if dry {
		verb = "would move"
	}
	fmt.Fprintf(w, "%s %d copies to %s; %d not encrypted; %d changed or deleted meanwhile (left as they are); %d failed\n", verb, r.movedOrPlanned(current, dry), current, r.plain, r.gone, r.failed)
	var unused []string
	for _, id := range configured {
		if r.after[id] == 0 && id != current {
			unused = append(unused, id)
		}
	}
	switch {
	case r.keyless:
		fmt.Fprintln(w, "some copies' KEKs are not listed, or do not open them (the errors above name them): list those KEKs again in objects.encryption.keys and run it again; remove no key before")
	case r.failed > 0 || r.gone > 0:
		fmt.Fprintln(w, "not every copy was read: run it again before removing any key")
	case len(unused) > 0 && !dry:
		fmt.Fprintf(w, "no copy is wrapped by %s any more: it can be removed from objects.encryption.keys\n", strings.Join(unused, ", "))
	}
}

func (r *rewrapReport) movedOrPlanned(current string, dry bool) int {
	if !dry {
		return r.moved
	}
	n := 0
	for id, c := range r.before {
		if id != current {
			n += c
		}
	}
	return n
}
