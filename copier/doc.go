// Package copier finds rolled segments in Kafka partition directories,
// copies them to remote storage and applies local and remote retention.
package copier
