package batch

import "io"

// FirstNonZero returns the position of the first non-zero byte of r in
// [from, to), or -1 when every byte there is zero. A segment created with
// log.preallocate=true (Kafka's FileRecords.openChannel sets the file to
// its full size up front) holds zero bytes after its last batch until the
// broker trims it; such a tail is the end of the data, not corruption.
func FirstNonZero(r io.ReaderAt, from, to int64) (int64, error) {
	buf := make([]byte, min(max(to-from, 0), 64<<10))
	for at := from; at < to; {
		n := min(int64(len(buf)), to-at)
		if err := readFull(r, buf[:n], at); err != nil {
			return 0, err
		}
		for i, c := range buf[:n] {
			if c != 0 {
				return at + int64(i), nil
			}
		}
		at += n
	}
	return -1, nil
}
