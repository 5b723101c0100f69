package wal

import "unsafe"

// unsafeString returns a string that shares b's memory. Callers guarantee b is
// never written again: read batches are fresh buffers that are never reused.
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
