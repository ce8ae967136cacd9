// Package daemon holds the parts of a running tierd ("tierd run") that are
// not the command line: the config reloader, which on SIGHUP (and for
// "tierd config reload") reads tierd.yaml again, applies the dynamic
// settings that changed, refuses the static ones, and records the outcome
// in the metadata dir for the command to print; and the runtime file, in
// the metadata dir too, which says where the running tierd listens.
package daemon
