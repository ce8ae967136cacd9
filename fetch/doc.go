// Package fetch serves remote reads over gRPC: Fetch by offset, ListOffsets
// by timestamp, ListSegments.
package fetch
