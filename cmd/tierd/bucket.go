package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/daemon"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/filesystem"
)

const bucketUsage = "tierd bucket create --config tierd.yaml"

// runBucket is "tierd bucket create": it creates the configured bucket
// (the directory of a filesystem bucket; the bucket on MinIO or S3, in the
// configured region), says so, or says it exists already (not an error),
// then checks that tierd's credentials can list it.
func runBucket(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "create" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprintln(stdout, "usage: "+bucketUsage)
			return 0
		}
		fmt.Fprintln(stderr, "usage: "+bucketUsage)
		return 2
	}
	cfg, code, ok := configCommand("bucket create", bucketUsage, args[1:], stderr, nil)
	if !ok {
		return code
	}
	if err := createBucket(ctx, cfg.Bucket, stdout); err != nil {
		fmt.Fprintf(stderr, "tierd bucket create: %v\n", err)
		return 1
	}
	return 0
}

func createBucket(ctx context.Context, c config.Bucket, stdout io.Writer) error {
	if c.Type == "filesystem" {
		dir := c.Filesystem.Dir
		b, err := filesystem.Unopened(c.Filesystem)
		if err != nil {
			return err
		}
		created, err := b.CreateBucket(ctx)
		if err != nil {
			return err
		}
		if created {
			fmt.Fprintf(stdout, "created filesystem bucket %s\n", dir)
		} else {
			fmt.Fprintf(stdout, "filesystem bucket %s exists already; nothing to do\n", dir)
		}
		return nil
	}
	b, err := daemon.OpenBucket(ctx, c)
	if err != nil {
		return err
	}
	defer b.Close()
	cr, ok := b.(rsm.Creator)
	if !ok {
		return fmt.Errorf("%s: this bucket type cannot create buckets", b.Name())
	}
	created, err := cr.CreateBucket(ctx)
	if err != nil {
		return err
	}
	if created {
		fmt.Fprintf(stdout, "created bucket %s\n", b.Name())
	} else {
		fmt.Fprintf(stdout, "bucket %s exists already; nothing to do\n", b.Name())
	}
	if ch, ok := b.(rsm.Checker); ok {
		if err := ch.Check(ctx, c.Prefix); err != nil {
			var be *rsm.BucketError
			if errors.As(err, &be) {
				return err
			}
			return fmt.Errorf("%s: listing it failed: %w", b.Name(), err)
		}
		fmt.Fprintf(stdout, "tierd's credentials can list it\n")
	}
	return nil
}
