package main

import (
	"bytes"
	"io"
	"os"
	"testing"

	"github.com/creack/pty"
)

// TestIsTerminal: a pseudo-terminal is a terminal; /dev/null (a character
// device), a pipe, a file and a buffer are not.
func TestIsTerminal(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("open a pty: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	file, err := os.Create(t.TempDir() + "/out")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	tests := []struct {
		name string
		w    io.Writer
		want bool
	}{
		{"pty", tty, true},
		{"/dev/null", null, false},
		{"pipe", w, false},
		{"file", file, false},
		{"buffer", &bytes.Buffer{}, false},
	}
	for _, tt := range tests {
		if got := isTerminal(tt.w); got != tt.want {
			t.Errorf("isTerminal(%s) = %v, want %v", tt.name, got, tt.want)
		}
	}
	// Not a terminal: the progress bar stays quiet and its stop returns.
	showProgress(null, 10, nil, nil)()
}
