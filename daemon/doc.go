// Package daemon is "tierd run" as a library: cmd/tierd parses the flags
// and calls it.
//
//   - Parts (parts.go): the parts opened from tierd.yaml and wired
//     (OpenParts): the metadata store, the bucket behind its watch, the
//     copier, the gRPC API over the remote read engine, the joined log
//     view, the Kafka cluster client. The demo and the offline tools
//     open the same parts and drive them in process.
//   - Run (run.go): the log dirs locked, the parts opened, and every
//     long-running part in one run group: the bucket watch, the copier,
//     the gRPC API (its callers' tokens and ACLs, apiauth.go), the RSM
//     endpoint (rsmendpoint.go), the Kafka listeners with their SASL
//     logins and ACLs (kafkalisteners.go, kafkaauth.go), the HTTP
//     endpoint and the reloader, until the context ends or one fails.
//   - HTTP (http.go), the HTTP endpoint: metrics, health, readiness, the
//     status page (page.go, securityfacts.go), profiles;
//   - Reloader (reload.go), which on SIGHUP (and for "tierd config
//     reload") reads tierd.yaml again, applies the dynamic settings that
//     changed, refuses the static ones, reads the certificates (tls.go)
//     and the secret files again, and records the outcome (ReloadFile) in
//     the metadata dir for the command to print;
//   - the records a run keeps in the metadata dir beside the store: where
//     the running tierd listens (RuntimeFile), when the metadata dir was
//     new, which retention waits for (CreatedFile), and the log dirs it
//     last held its lock in (LogDirsFile).
//
// Secret files (tokens, SASL credentials) are opened with OpenPrivate,
// which refuses one that others may write or, for credentials, read.
package daemon
