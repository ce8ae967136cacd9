package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/daemon"
	"github.com/tierd/tierd/grpcapi"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/listener"
	"github.com/tierd/tierd/listener/groups"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/seglog"
)

// The reference scenario.
const (
	demoTopic        = "demo"
	demoRecords      = 600
	demoValueBytes   = 5000
	demoSegmentBytes = 1048576
	demoLocalRetMs   = 1000
)

type demoOptions struct {
	keep       string // root dir to keep; "" = temp dir, removed after
	s3Endpoint string
	s3Bucket   string
	s3Region   string
	s3Prefix   string
	verbose    bool
	runID      string // names the run's own prefix; "" = random (tests set it)
	serve      bool   // keep serving after the checks, until interrupted
	kafka      string // the Kafka listener's address
	grpc       string // the gRPC API's address
	compact    bool   // run the compaction scenario (demo_compact.go) instead
	objects    bool   // store copies compressed and encrypted, under a KEK of the run's own
	// answerTimeout bounds the bucket's first requests (creating the
	// bucket, claiming the prefix); 0 = rsm.ProbeTimeout (tests set it).
	answerTimeout time.Duration
}

// demoRunPrefix is the key prefix of one demo run: "tierd-demo-<id>",
// under the user's --s3-prefix when given. The demo writes only there.
func demoRunPrefix(o demoOptions) (string, error) {
	id := o.runID
	if id == "" {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		id = hex.EncodeToString(b[:])
	}
	if o.s3Endpoint == "" {
		return "tierd-demo-" + id, nil
	}
	return path.Join(o.s3Prefix, "tierd-demo-"+id), nil
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o demoOptions
	fs.StringVar(&o.keep, "keep", "", "keep the log dir, bucket and metadata under this (new or empty) directory")
	fs.StringVar(&o.s3Endpoint, "s3-endpoint", "", "S3/MinIO endpoint URL (e.g. http://127.0.0.1:9000); default: a filesystem bucket")
	fs.StringVar(&o.s3Bucket, "s3-bucket", "tierd", "bucket name, with --s3-endpoint (credentials: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or the AWS chain)")
	fs.StringVar(&o.s3Region, "s3-region", "us-east-1", "bucket region, with --s3-endpoint")
	fs.StringVar(&o.s3Prefix, "s3-prefix", "", "key prefix, with --s3-endpoint; the demo writes under <prefix>/tierd-demo-<random>/ and, without --keep, deletes exactly the objects it wrote there")
	fs.BoolVar(&o.verbose, "v", false, "log what tierd does")
	fs.BoolVar(&o.serve, "serve", false, "after the checks, keep serving the demo log (Kafka listener and gRPC API) until interrupted")
	fs.StringVar(&o.kafka, "kafka-listen", "127.0.0.1:9192", "address of the Kafka listener (with --serve; otherwise a free port)")
	fs.StringVar(&o.grpc, "grpc-listen", "127.0.0.1:7450", "address of the gRPC API (with --serve; otherwise a free port)")
	fs.BoolVar(&o.objects, "objects", false, "store the copies in chunked form, zstd-compressed and AES-256-GCM-encrypted under a key-encryption key the run makes (keys/demo.kek, kept with --keep)")
	fs.BoolVar(&o.compact, "compact", false, "run the compaction scenario instead: a cleanup.policy=compact topic cleaned twice (34 -> 258 -> 506 records), then tiered")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2
	}
	if err := demo(ctx, o, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "tierd demo: %v\n", err)
		return 1
	}
	return 0
}

// demoValue is the value of the record at offset: recognisable and checked
// byte for byte on the way back.
func demoValue(offset int64) []byte {
	v := bytes.Repeat([]byte{byte('a' + offset%26)}, demoValueBytes)
	copy(v, fmt.Sprintf("record %d of the tierd demo;", offset))
	return v
}

// demoEnv is a demo run's tierd: its config, daemon and the bucket
// wrapper that records what the run uploaded.
type demoEnv struct {
	o    demoOptions
	root string
	cfg  config.Config
	log  *slog.Logger
	d    *daemon.Parts
	rec  *rsm.RecordingBucket
	done []func(*error) // run by close, last first
}

// openDemo prepares a demo run: its root dir (a temp dir, or --keep, which
// must be new or empty), a config (tweak adjusts it before it is checked
// and kept), and a daemon writing only under the run's own prefix. close
// undoes it all: without --keep it deletes exactly the objects the run
// uploaded and the temp dir.
func openDemo(ctx context.Context, o demoOptions, stdout, stderr io.Writer, tweak func(*config.Config)) (_ *demoEnv, err error) {
	e := &demoEnv{o: o}
	defer func() {
		if err != nil {
			e.close(&err, stdout)
		}
	}()
	e.root = o.keep
	if e.root == "" {
		tmp, err := os.MkdirTemp("", "tierd-demo-")
		if err != nil {
			return nil, err
		}
		e.done = append(e.done, func(*error) { os.RemoveAll(tmp) })
		e.root = tmp
	} else if ents, err := os.ReadDir(e.root); err == nil && len(ents) > 0 {
		return nil, fmt.Errorf("--keep %s: directory is not empty", e.root)
	}
	root := e.root
	cfg := config.Default()
	cfg.Copier.LogDirs = []string{filepath.Join(root, "logs")}
	cfg.Copier.FileDeleteDelayMs = 0
	cfg.Copier.OwnershipLease = 0 // the demo alone writes its prefix: no lease, no broker_id
	localMs := int64(demoLocalRetMs)
	cfg.Copier.Retention.LocalRetentionMs = &localMs
	cfg.Metadata.Dir = filepath.Join(root, "metadata")
	cfg.Bucket.Filesystem.Dir = filepath.Join(root, "bucket")
	if cfg.Bucket.Prefix, err = demoRunPrefix(o); err != nil {
		return nil, err
	}
	if o.s3Endpoint != "" {
		cfg.Bucket.Type = "s3"
		cfg.Bucket.S3.Endpoint, cfg.Bucket.S3.Bucket, cfg.Bucket.S3.Region, cfg.Bucket.S3.PathStyle = o.s3Endpoint, o.s3Bucket, o.s3Region, true
	}
	if o.objects {
		if err := demoObjects(&cfg, root); err != nil {
			return nil, err
		}
	}
	if tweak != nil {
		tweak(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e.cfg = cfg
	if o.s3Endpoint == "" { // the demo's own bucket dir, under its root
		if err := os.MkdirAll(cfg.Bucket.Filesystem.Dir, 0o755); err != nil {
			return nil, err
		}
	}
	if o.keep != "" { // so that "tierd segments" and "tierd run" can open what is kept
		data, err := yaml.Marshal(cfg)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(root, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(root, "tierd.yaml"), data, 0o644); err != nil {
			return nil, err
		}
	}
	e.log = slog.New(slog.DiscardHandler)
	if o.verbose {
		var flush func()
		e.log, flush = newLogger(stderr, slog.LevelInfo)
		e.done = append(e.done, func(*error) { flush() })
	}
	wrap := func(b rsm.Bucket) (rsm.Bucket, error) {
		// A store that takes the connection and never answers would hold
		// the demo for ever: its first requests are bounded.
		limit := o.answerTimeout
		if limit <= 0 {
			limit = rsm.ProbeTimeout
		}
		fctx, cancel := context.WithTimeout(ctx, limit)
		defer cancel()
		silent := func(err error) error {
			if ctx.Err() == nil && errors.Is(fctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%s did not answer within %s: %w", b.Name(), limit, err)
			}
			return err
		}
		if eb, ok := b.(interface{ EnsureBucket(context.Context) error }); ok {
			if err := eb.EnsureBucket(fctx); err != nil {
				return nil, silent(err)
			}
		}
		r, err := rsm.ClaimPrefix(fctx, b, cfg.Bucket.Prefix)
		if err != nil {
			return nil, fmt.Errorf("the demo writes only under a new prefix of its own: %w", silent(err))
		}
		e.rec = r
		return r, nil
	}
	d, err := daemon.OpenParts(ctx, cfg, daemon.PartsOptions{Wrap: wrap}, e.log, prometheus.NewRegistry())
	if err != nil {
		return nil, err
	}
	e.d = d
	e.done = append(e.done, func(*error) { d.Close() })
	if o.keep == "" {
		// The temp dirs go at the end, and the objects this run uploaded:
		// those keys exactly, never what a listing finds.
		e.done = append(e.done, func(err *error) {
			n, derr := e.rec.DeleteWritten(context.WithoutCancel(ctx))
			if derr != nil {
				*err = errors.Join(*err, fmt.Errorf("clean up the demo's objects: %w", derr))
			}
			if o.s3Endpoint != "" {
				fmt.Fprintf(stdout, "deleted the %d objects the demo wrote under %s in %s\n", n, e.rec.Prefix(), d.Bucket.Name())
			}
		})
	}
	return e, nil
}

// demoObjects makes new copies chunked, compressed and encrypted under a
// new KEK, "demo", written to root/keys/demo.kek (mode 0600, in a 0700
// directory) as "tierd keys new" writes one.
func demoObjects(cfg *config.Config, root string) error {
	dir := filepath.Join(root, "keys")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	p := filepath.Join(dir, "demo.kek")
	if err := newKEKFile(p); err != nil {
		return fmt.Errorf("the demo's key-encryption key: %w", err)
	}
	cfg.Objects.Compression, cfg.Objects.Encryption = true, true
	cfg.Objects.EncryptionKeyID = "demo"
	cfg.Objects.EncryptionKeys = map[string]string{"demo": p}
	return nil
}

// close undoes openDemo, joining its errors into *err.
func (e *demoEnv) close(err *error, stdout io.Writer) {
	for i := len(e.done) - 1; i >= 0; i-- {
		e.done[i](err)
	}
	e.done = nil
}

// printKept says what --keep kept and how to list it.
func (e *demoEnv) printKept(stdout io.Writer) {
	switch {
	case e.o.keep != "" && e.o.s3Endpoint == "":
		fmt.Fprintf(stdout, "kept: %s/{logs,bucket,metadata,tierd.yaml}; list them with: go run ./cmd/tierd segments --config %s/tierd.yaml (or bin/tierd after make build)\n", e.o.keep, e.o.keep)
	case e.o.keep != "":
		fmt.Fprintf(stdout, "kept: %s/{logs,metadata,tierd.yaml} and the objects under %s/ in %s; list them with: go run ./cmd/tierd segments --config %s/tierd.yaml (or bin/tierd after make build)\n",
			e.o.keep, e.cfg.Bucket.Prefix, e.d.Bucket.Name(), e.o.keep)
	}
}

// demo writes the reference scenario with the embedded segment log, lets
// tierd tier it, and reads every record back across both tiers. It writes
// only under a prefix of its own, unique to the run (refused when it is not
// empty), and at the end, without --keep, deletes exactly the keys it
// uploaded; nothing else in the bucket is touched.
func demo(ctx context.Context, o demoOptions, stdout, stderr io.Writer) (err error) {
	if o.compact {
		return demoCompact(ctx, o, stdout, stderr)
	}
	e, err := openDemo(ctx, o, stdout, stderr, nil)
	if err != nil {
		return err
	}
	defer e.close(&err, stdout)
	cfg, d, log := e.cfg, e.d, e.log
	tp := remotelog.TopicPartition{Topic: demoTopic, Partition: 0}

	// 1. Write the scenario with the embedded segment log: the reference run's
	// records on demo, and keyed records with headers on demo-keyed.
	logDir := cfg.Copier.LogDirs[0]
	partDir := filepath.Join(logDir, demoTopic+"-0")
	baseMs := time.Now().UnixMilli() - demoRecords // recent: within retention.ms
	if _, err := writeDemoTopic(partDir, demoSegmentBytes, demoRecords, baseMs, true, demoRecord); err != nil {
		return err
	}
	keyedLocalStart, err := writeDemoTopic(filepath.Join(logDir, demoKeyedTopic+"-0"), demoKeyedSegmentBytes, demoKeyedRecords, baseMs, false, demoKeyedRecord)
	if err != nil {
		return err
	}
	scfg := seglog.DefaultConfig()
	scfg.SegmentBytes = demoSegmentBytes
	fmt.Fprintf(stdout, "wrote %d records of %d bytes (no key, no headers, one per batch) to %s (segment.bytes=%d)\n", demoRecords, demoValueBytes, partDir, demoSegmentBytes)
	fmt.Fprintf(stdout, "wrote %d records with a key and a header to %s-0 (segment.bytes=%d; offsets %d-%d stay in the active segment)\n",
		demoKeyedRecords, demoKeyedTopic, demoKeyedSegmentBytes, keyedLocalStart, demoKeyedRecords-1)
	fmt.Fprintf(stdout, "bucket %s, prefix %s/ (this run's own), metadata %s\n", d.Bucket.Name(), cfg.Bucket.Prefix, cfg.Metadata.Dir)
	if o.objects {
		fmt.Fprintf(stdout, "copies stored in chunked form: zstd-compressed, AES-256-GCM-encrypted under key-encryption key %q (%s)\n",
			cfg.Objects.CurrentKeyID(), cfg.Objects.EncryptionKeys[cfg.Objects.CurrentKeyID()])
	}

	// 2. Serve remote fetches on a real socket.
	grpcAddr, kafkaAddr := "127.0.0.1:0", "127.0.0.1:0"
	if o.serve {
		grpcAddr, kafkaAddr = o.grpc, o.kafka
	}
	lis, err := net.Listen("tcp", grpcAddr)
	if err != nil {
		return fmt.Errorf("gRPC API: %w", err)
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- d.API.Serve(sctx, lis) }()
	client, err := grpcapi.Dial(lis.Addr().String())
	if err != nil {
		return err
	}
	defer client.Close()

	// 3. Tier: copy the rolled segments, then local retention removes them.
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := d.Copier.Sync(ctx); err != nil {
			return err
		}
		offs, _, err := d.Store.Offsets(tp)
		if err != nil {
			return err
		}
		koffs, _, err := d.Store.Offsets(remotelog.TopicPartition{Topic: demoKeyedTopic, Partition: 0})
		if err != nil {
			return err
		}
		if offs.LocalLogStartOffset == demoRecords && koffs.LocalLogStartOffset == keyedLocalStart {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("tiering did not finish in 60s: %s-0 %+v, %s-0 %+v", demoTopic, offs, demoKeyedTopic, koffs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Fprintf(stdout, "tierd copied the rolled segments; local.retention.ms=%d removed their local copies\n\n", demoLocalRetMs)

	// 4. Read everything back through the embedded log: local, then remote.
	r, err := seglog.Open(partDir, scfg, seglog.WithRemote(client.Partition(demoTopic, 0)))
	if err != nil {
		return err
	}
	defer r.Close()
	good, err := readBack(ctx, r)
	if err != nil {
		return err
	}
	if err := printSegments(ctx, stdout, d, r, tp); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d/%d records read back\n", good, demoRecords)
	if good != demoRecords {
		return fmt.Errorf("only %d of %d records read back", good, demoRecords)
	}

	// 5. Read them again as any Kafka consumer would, through the Kafka
	// listener.
	klis, err := net.Listen("tcp", kafkaAddr)
	if err != nil {
		return fmt.Errorf("kafka listener: %w", err)
	}
	coord, err := groups.New(cfg.Kafka.Listener.Groups, d.Store, groups.WithLogger(log.With("component", "groups"))) // consumer groups, kept in the demo's metadata
	if err != nil {
		klis.Close()
		return err
	}
	kl, err := d.KafkaListener(cfg, log, klis.Addr().String(), listener.WithGroups(coord))
	if err != nil {
		klis.Close()
		return err
	}
	kserved := make(chan error, 2)
	go func() { kserved <- coord.Run(sctx) }()
	go func() { kserved <- kl.Serve(sctx, klis) }()
	kgood, err := kafkaReadBack(ctx, klis.Addr().String(), demoTopic, demoRecords, baseMs, demoRecord)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d/%d records read back through the Kafka listener (franz-go): offsets, values, timestamps\n", kgood, demoRecords)
	if kgood != demoRecords {
		return fmt.Errorf("only %d of %d records read back through the Kafka listener", kgood, demoRecords)
	}
	kgood, err = kafkaReadBack(ctx, klis.Addr().String(), demoKeyedTopic, demoKeyedRecords, baseMs, demoKeyedRecord)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d/%d records of %s read back through the Kafka listener, from both tiers: offsets, keys, values, headers, timestamps\n", kgood, demoKeyedRecords, demoKeyedTopic)
	if kgood != demoKeyedRecords {
		return fmt.Errorf("only %d of %d records of %s read back through the Kafka listener", kgood, demoKeyedRecords, demoKeyedTopic)
	}
	if o.serve {
		fmt.Fprintf(stdout, "\nserving the demo log until interrupted (Ctrl-C):\n  Kafka listener %s:\n    kcat -C -b %s -t %s -p 0 -o beginning -e -f '%%o %%T %%S\\n'\n    kcat -C -b %s -t %s -p 0 -o beginning -e -f '%%o %%k %%T %%h\\n'\n    kcat -b %s -G demo-group -X auto.offset.reset=earliest -e -q %s   (a consumer group: it commits, and a second run reads nothing new)\n  gRPC API %s\n",
			klis.Addr(), klis.Addr(), demoTopic, klis.Addr(), demoKeyedTopic, klis.Addr(), demoTopic, lis.Addr())
		<-ctx.Done()
	}
	stop()
	if err := errors.Join(<-served, <-kserved, <-kserved); err != nil {
		return err
	}
	e.printKept(stdout)
	return nil
}

// readBack reads offsets 0..599 in order and counts the records whose
// offset and value are right.
func readBack(ctx context.Context, r *seglog.Log) (int, error) {
	good := 0
	for off := int64(0); off < demoRecords; {
		data, err := r.ReadContext(ctx, off, 1<<20)
		if err != nil {
			return good, fmt.Errorf("read offset %d: %w", off, err)
		}
		if len(data) == 0 {
			return good, fmt.Errorf("read offset %d: no data", off)
		}
		recs, err := seglog.DecodeRecords(data)
		if err != nil {
			return good, fmt.Errorf("read offset %d: %w", off, err)
		}
		if len(recs) == 0 {
			return good, fmt.Errorf("read offset %d: no records", off)
		}
		for _, rec := range recs {
			if rec.Offset == off && bytes.Equal(rec.Value, demoValue(off)) && rec.Key == nil {
				good++
			}
			off = rec.Offset + 1
		}
	}
	return good, nil
}

func printSegments(ctx context.Context, w io.Writer, d *daemon.Parts, r *seglog.Log, tp remotelog.TopicPartition) error {
	rows, err := d.Store.Segments(tp)
	if err != nil {
		return err
	}
	state := map[int64]string{}
	for _, row := range rows {
		state[row.StartOffset] = row.State.String()
	}
	local := map[int64]seglog.SegmentInfo{}
	for _, s := range r.Segments() {
		local[s.BaseOffset] = s
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "base offset\tlast offset\tbytes\tlocal\tremote state\tstored\t")
	for _, row := range rows {
		_, isLocal := local[row.StartOffset]
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\t%s\t\n", row.StartOffset, row.EndOffset, row.SizeInBytes, yesNo(isLocal), row.State,
			storedText(row.Form, row.Encrypted, row.StoredSizeInBytes, row.SizeInBytes))
	}
	for _, s := range r.Segments() {
		if _, ok := state[s.BaseOffset]; !ok {
			last := "-"
			if s.NextOffset > s.BaseOffset {
				last = fmt.Sprint(s.NextOffset - 1)
			}
			fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t\n", s.BaseOffset, last, s.Size, "yes", "-", "-")
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	lso, err := r.LogStartOffsetContext(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nlog start offset %d, local log start offset %d, high watermark %d\n", lso, r.LocalLogStartOffset(), r.HighWatermark())
	return nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
