package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/tierd/tierd/copier"
	"github.com/tierd/tierd/fetch"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/filesystem"
	"github.com/tierd/tierd/rsm/minio"
	"github.com/tierd/tierd/rsm/s3"
)

// config is the tierd.yaml file. Every section keeps its package's
// defaults for the fields it leaves out.
type config struct {
	Copier   copier.Config `yaml:"copier"`
	Bucket   bucketConfig  `yaml:"bucket"`
	Metadata rlmm.Config   `yaml:"metadata"`
	Fetch    fetch.Config  `yaml:"fetch"`
	HTTP     httpConfig    `yaml:"http"`
	// LogLevel is debug, info, warn or error. Default info.
	LogLevel string `yaml:"log_level"`
}

type httpConfig struct {
	// Listen serves /metrics, /-/healthy and /-/ready. Default
	// "127.0.0.1:7451"; "" turns it off.
	Listen string `yaml:"listen"`
}

// bucketConfig picks and configures the object store.
type bucketConfig struct {
	// Type is filesystem (default), minio (minio-go) or s3 (aws-sdk-go-v2).
	Type       string            `yaml:"type"`
	Prefix     string            `yaml:"prefix"`
	Filesystem filesystem.Config `yaml:"filesystem"`
	MinIO      minio.Config      `yaml:"minio"`
	S3         s3.Config         `yaml:"s3"`
}

func defaultConfig() config {
	return config{
		Copier: copier.DefaultConfig(), Fetch: fetch.DefaultConfig(), LogLevel: "info",
		Bucket: bucketConfig{Type: "filesystem", MinIO: minio.DefaultConfig(), S3: s3.DefaultConfig()},
		HTTP:   httpConfig{Listen: "127.0.0.1:7451"},
	}
}

// loadConfig reads a YAML file strictly: unknown keys are errors.
func loadConfig(path string) (config, error) {
	cfg := defaultConfig()
	data, err := os.ReadFile(path)
	if err != nil {
		return cfg, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	if err := cfg.validate(); err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

func (c config) validate() error {
	errs := []error{c.Copier.Validate(), c.Metadata.Validate(), c.Fetch.Validate(), (rsm.Config{Prefix: c.Bucket.Prefix}).Validate()}
	switch c.Bucket.Type {
	case "filesystem":
		errs = append(errs, c.Bucket.Filesystem.Validate())
	case "minio":
		errs = append(errs, c.Bucket.MinIO.Validate())
	case "s3":
		errs = append(errs, c.Bucket.S3.Validate())
	default:
		errs = append(errs, fmt.Errorf("bucket: type %q: want filesystem, minio or s3", c.Bucket.Type))
	}
	if c.HTTP.Listen != "" {
		if _, _, err := net.SplitHostPort(c.HTTP.Listen); err != nil {
			errs = append(errs, fmt.Errorf("http: listen %q: %w", c.HTTP.Listen, err))
		}
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(s))); err != nil {
		return l, fmt.Errorf("log_level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// openBucket builds the configured bucket.
func openBucket(ctx context.Context, c bucketConfig) (rsm.Bucket, error) {
	switch c.Type {
	case "minio":
		return minio.New(c.MinIO, nil)
	case "s3":
		return s3.New(ctx, c.S3, nil)
	}
	return filesystem.New(c.Filesystem)
}
