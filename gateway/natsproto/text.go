package natsproto

import "edgeq/gateway/subject"

// Text is a subject or header field held as a string or as bytes; the
// functions that take it never convert, so they never allocate.
type Text = subject.Text
