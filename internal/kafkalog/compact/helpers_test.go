package compact

import "hash/crc32"

func crcIEEE(b []byte) uint32 { return crc32.ChecksumIEEE(b) }
