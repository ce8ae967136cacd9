package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
)

// TestBenchFlags: bad sizes, scales and case names are refused with exit
// code 2 and a message naming the flag, before anything starts; -h lists
// the growth cases' flags.
func TestBenchFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--scale", "huge"}, `--scale: scale "huge": want small or full`},
		{[]string{"--cases", "read,scale"}, `case "scale": want some of read, copy, readers, plugin, scale_partitions, scale_segments`},
		{[]string{"--partitions", "10,x"}, `--partitions: "x" is not a whole number`},
		{[]string{"--copies", "1000,100"}, "copies [1000 100] must be positive and rising"},
		{[]string{"--reader-counts", "0,8"}, "reader counts [0 8] must be positive and rising"},
		{[]string{"--scale-buckets", "gcs"}, `scale bucket "gcs": want filesystem or minio`},
		{[]string{"--case-timeout", "-1s"}, "case timeout -1s must be positive"},
		{[]string{"--plot", "b.gif"}, ".png or .svg"},
		{[]string{"--child-bucket-type", "gcs"}, `child bucket type "gcs": want s3 or minio`},
	} {
		var out, errb bytes.Buffer
		code := runBench(context.Background(), tc.args, &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("tierd bench %v: exit %d, stderr %q; want 2 and %q", tc.args, code, errb.String(), tc.want)
		}
	}
	var out, errb bytes.Buffer
	if code := runBench(context.Background(), []string{"-h"}, &out, &errb); code != 0 {
		t.Errorf("-h: exit %d", code)
	}
	for _, f := range []string{"-scale", "-cases", "-partitions", "-copies", "-reader-counts", "-reader-bytes", "-scale-buckets", "-case-timeout",
		"-kafka-rsm-jars", "-java", "-child-bucket-type"} {
		if !strings.Contains(errb.String(), f) {
			t.Errorf("-h does not list %s:\n%s", f, errb.String())
		}
	}
}

// --scale full sets the full sizes, and an explicit size flag wins
// over the scale's.
func TestBenchScaleFlags(t *testing.T) {
	cfg, code := benchConfig([]string{"--scale", "full", "--copies", "50,500"}, &bytes.Buffer{})
	if code != -1 {
		t.Fatalf("exit %d", code)
	}
	if len(cfg.Partitions) != 3 || cfg.Partitions[2] != 10000 || cfg.Copies[1] != 500 || cfg.ReaderCounts[3] != 64 || cfg.CaseTimeout.Minutes() != 30 {
		t.Errorf("config %+v", cfg)
	}
}

// The plugin cases find their jars in bin/ and build them from
// kafka-rsm/ in a checkout (here: cmd/tierd has no kafka-rsm/, so
// nothing is built); --kafka-rsm-jars names other jars, never built.
func TestBenchPluginFlags(t *testing.T) {
	cfg, code := benchConfig(nil, &bytes.Buffer{})
	if code != -1 || cfg.PluginJars != "bin" || cfg.PluginSource != "" || !slices.Contains(cfg.Cases, "plugin") {
		t.Errorf("defaults: exit %d, jars %q, source %q, cases %v", code, cfg.PluginJars, cfg.PluginSource, cfg.Cases)
	}
	cfg, code = benchConfig([]string{"--kafka-rsm-jars", "/opt/jars", "--java", "/opt/jdk/bin/java"}, &bytes.Buffer{})
	if code != -1 || cfg.PluginJars != "/opt/jars" || cfg.PluginSource != "" || cfg.Java != "/opt/jdk/bin/java" {
		t.Errorf("--kafka-rsm-jars: exit %d, %+v", code, cfg)
	}
}
