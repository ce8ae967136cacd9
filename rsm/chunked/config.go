package chunked

import (
	"errors"
	"fmt"
)

// Config says how new copies are stored. The zero value stores copies as
// they came (whole objects, no chunks); see DefaultConfig.
type Config struct {
	// ChunkBytes is the original bytes per chunk. Default 256 KiB: a
	// cold read of a Fetch's range (1 MiB) decodes at most a chunk more
	// than it asks for, and the chunk cache's 16 MiB chunk is 64 whole
	// chunks; on loopback, at 4 MiB a cold Fetch took about 2.5x
	// (encrypted) to 3.3x (compressed text) the plain one's p50, at 256
	// KiB 1.1x and 1.6x, while zstd saves as much within 1% (docs/bench.md
	// has the measurements).
	// The chunk index grows with the chunk count: about 11 bytes of
	// manifest per chunk, 44 KiB for a 1 GiB segment. 64 KiB to 64 MiB.
	ChunkBytes int `yaml:"chunk.size"`
	// Compression turns on zstd per chunk. Default false.
	Compression bool `yaml:"compression.enabled"`
	// CompressionLevel is klauspost/compress's zstd encoder level: 1
	// fastest (about zstd's level 1), 2 default (about 3), 3 better
	// (about 7), 4 best (about 11). Default 1.
	CompressionLevel int `yaml:"compression.level"`
	// Heuristic skips the full compression of chunks whose first 64 KiB
	// do not compress (see the package doc). Default true.
	Heuristic bool `yaml:"compression.heuristic.enabled"`
	// Encryption seals every chunk under a data key per copy, wrapped by
	// the Keyring's current KEK. Default false.
	Encryption bool `yaml:"encryption.enabled"`
}

// Limits of ChunkBytes.
const (
	MinChunkBytes = 64 << 10
	MaxChunkBytes = 64 << 20
)

// DefaultConfig returns the defaults: 256 KiB chunks, level 1, heuristic
// on, compression and encryption off.
func DefaultConfig() Config {
	return Config{ChunkBytes: 256 << 10, CompressionLevel: 1, Heuristic: true}
}

// Chunked reports whether new copies go in chunked form: when they are
// compressed or encrypted.
func (c Config) Chunked() bool { return c.Compression || c.Encryption }

// Validate checks the chunk size and level when copies go chunked.
func (c Config) Validate() error {
	if !c.Chunked() {
		return nil
	}
	var errs []error
	if c.ChunkBytes < MinChunkBytes || c.ChunkBytes > MaxChunkBytes {
		errs = append(errs, fmt.Errorf("chunk.size %d: must be %d to %d bytes", c.ChunkBytes, MinChunkBytes, MaxChunkBytes))
	}
	if c.Compression && (c.CompressionLevel < 1 || c.CompressionLevel > 4) {
		errs = append(errs, fmt.Errorf("compression.level %d: must be 1 (fastest) to 4 (best)", c.CompressionLevel))
	}
	return errors.Join(errs...)
}
