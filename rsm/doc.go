// Package rsm is tierd's RemoteStorageManager: it copies a segment's files
// to a bucket and reads them back by byte range. Its bucket interface has
// filesystem, MinIO and S3 implementations.
package rsm
