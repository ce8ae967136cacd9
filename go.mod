module github.com/tierd/tierd

go 1.26.8

require (
	github.com/klauspost/compress v1.20.4
	github.com/pierrec/lz4/v4 v4.1.33
)

require github.com/twmb/franz-go/pkg/kmsg v1.15.1 // indirect
