package index

import "encoding/binary"

// AppendAbortedTxn appends one .txnindex entry (TxnEntrySize bytes:
// version int16, producer id int64, first offset int64, last offset
// int64, last stable offset int64, big-endian; Apache Kafka
// AbortedTxn.java) to dst. Version is written as given (Kafka writes 0).
func AppendAbortedTxn(dst []byte, t AbortedTxn) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(t.Version))
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.ProducerID))
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.FirstOffset))
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.LastOffset))
	return binary.BigEndian.AppendUint64(dst, uint64(t.LastStableOffset))
}
