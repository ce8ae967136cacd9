package kafkalog

import (
	"errors"
	"fmt"
)

// ErrCorrupt marks every error that reports bad bytes in a Kafka file. Match
// it with errors.Is; use errors.As with *CorruptionError for the position.
var ErrCorrupt = errors.New("kafkalog: corrupt data")

// CorruptionError says where a Kafka file stops being valid.
type CorruptionError struct {
	// File is the path of the file, or "" when decoding bytes in memory.
	File string
	// Position is the byte position of the first invalid byte, from the
	// start of the file (or of the buffer).
	Position int64
	// Reason says what is wrong, e.g. "batch length 12 below minimum 49".
	Reason string
}

// Error implements error.
func (e *CorruptionError) Error() string {
	if e.File == "" {
		return fmt.Sprintf("corrupt data at byte %d: %s", e.Position, e.Reason)
	}
	return fmt.Sprintf("%s: corrupt data at byte %d: %s", e.File, e.Position, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }

// Corruptf returns a *CorruptionError without a file name; callers that know
// the file set it with WithFile.
func Corruptf(pos int64, format string, args ...any) *CorruptionError {
	return &CorruptionError{Position: pos, Reason: fmt.Sprintf(format, args...)}
}

// WithFile returns err with the file name set when err is a
// *CorruptionError whose File is empty; other errors are returned unchanged.
func WithFile(err error, file string) error {
	var ce *CorruptionError
	if errors.As(err, &ce) && ce.File == "" {
		cp := *ce
		cp.File = file
		return &cp
	}
	return err
}
