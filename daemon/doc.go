// Package daemon holds the parts of a running tierd ("tierd run") that are
// not the command line:
//
//   - HTTP, the HTTP endpoint: metrics, health, readiness, the status
//     page, profiles;
//   - Reloader, which on SIGHUP (and for "tierd config reload") reads
//     tierd.yaml again, applies the dynamic settings that changed, refuses
//     the static ones, and records the outcome (ReloadFile) in the
//     metadata dir for the command to print;
//   - the records a run keeps in the metadata dir beside the store: where
//     the running tierd listens (RuntimeFile), when the metadata dir was
//     new, which retention waits for (CreatedFile), and the log dirs it
//     last held its lock in (LogDirsFile).
package daemon
