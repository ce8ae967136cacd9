package rsmapi

import (
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"sync"
)

// castagnoli is CRC-32C's table, the checksum of the manifest's objects.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checkedCRC is the .log's reader during its check: it takes the CRC-32C
// of the bytes the check reads, in order from byte 0, so that the upload
// can be proven to have sent those same bytes (a file rewritten in place
// between the check and the upload, or a disk that answers a second read
// differently, would otherwise be stored unchecked). Reads that start
// past the bytes summed so far are passed through unsummed; the check
// reads them again in order (segcheck reads every byte of a segment it
// accepts from byte 0 on, the zero tail included).
type checkedCRC struct {
	r io.ReaderAt

	mu     sync.Mutex
	summed int64  // bytes [0, summed) are in crc
	crc    uint32 // CRC-32C of those bytes
}

func (c *checkedCRC) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.mu.Lock()
	defer c.mu.Unlock()
	if off <= c.summed && off+int64(n) > c.summed {
		c.crc = crc32.Update(c.crc, castagnoli, p[c.summed-off:n])
		c.summed = off + int64(n)
	}
	return n, err
}

// verify reports whether stored, the CRC-32C the upload took of the
// first size bytes of the .log (the manifest's 8 hex digits), is that of
// the bytes the check read. The check read the .log to fileSize; bytes
// [size, fileSize) are its zero tail, left out of the copy. Errors: the
// upload's bytes differ from the checked ones (the file changed between
// its check and its upload); the check did not read the file whole.
func (c *checkedCRC) verify(stored string, size, fileSize int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.summed < fileSize {
		return fmt.Errorf("the check of the .log read its bytes [0, %d) in order, not all %d", c.summed, fileSize)
	}
	up, err := strconv.ParseUint(stored, 16, 32)
	if err != nil {
		return fmt.Errorf("the upload's CRC-32C of the .log %q: %w", stored, err)
	}
	sum := uint32(up)
	zeros := make([]byte, min(fileSize-size, 64<<10))
	for left := fileSize - size; left > 0; left -= int64(len(zeros)) {
		sum = crc32.Update(sum, castagnoli, zeros[:min(left, int64(len(zeros)))])
	}
	if sum != c.crc {
		return fmt.Errorf("the .log changed between its check and its upload: the %d bytes uploaded are not the bytes checked", size)
	}
	return nil
}
