package dispatch

import "unsafe"

// unsafeString views b as a string for the duration of a Deliver call; the
// builder's buffers are not written while a member reads them.
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
