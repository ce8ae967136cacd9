// Package rlmm is tierd's RemoteLogMetadataManager: Kafka's
// RemoteLogSegmentMetadata rows and their states, kept in Pebble.
package rlmm
