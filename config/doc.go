// Package config is tierd.yaml: its schema (Config, whose sections are
// the Config types of the packages they configure, copier.Config,
// fetch.Config, rlmm.Config, ..., with a few sections of tierd's own), a
// strict Load that reports every problem at once with the nearest known
// key for an unknown one and values described in milliseconds, bytes and
// durations rather than Go types, the old spellings it still accepts
// (with a warning each), and which settings a running tierd takes on
// reload (DynamicKey, Diff).
//
// Every field's doc comment states its default and units; the
// configuration reference, docs/configuration-reference.md, is generated
// from them and from Default ("make config-reference", which runs go test
// ./config -run TestReference -update, writes it; the test fails while the
// file is not current).
//
// The package reads and checks settings; it opens no listener, bucket or
// store. Flags and the "tierd config" subcommand are cmd/tierd's.
package config
