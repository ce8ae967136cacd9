package rsmapi

import "github.com/tierd/tierd/internal/kafkalog/segcheck"

// Inspector checks one rolled segment's files as tierd's copier checks
// its own copies (package segcheck's rules): the .log's batches against
// their checksums and Kafka's header rules, its zero tail, and the
// indexes against the log, with indexes rebuilt by Kafka's rule when they
// are unusable.
type Inspector func(InspectInput) (InspectResult, error)

// InspectInput is what a check reads: segcheck.Input.
type InspectInput = segcheck.Input

// InspectResult is what a check found: segcheck.Result.
type InspectResult = segcheck.Result

// Inspect is the check the endpoint uses by default: segcheck.Inspect.
var Inspect Inspector = segcheck.Inspect
