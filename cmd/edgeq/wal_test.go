package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"edgeq/wal"
)

func TestWalCheckCommand(t *testing.T) {
	dir := t.TempDir()
	o := wal.DefaultOptions()
	l, err := wal.Open(dir, o, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		if _, err := l.Append(context.Background(), &wal.Record{Device: "d1", Payload: []byte("payload")}); err != nil {
			t.Fatal(err)
		}
	}
	p := l.HomePartition("d1")
	l.Close()
	var out, errOut bytes.Buffer
	if code := dispatch([]string{"wal", "check", dir}, &out, &errOut); code != 0 || !strings.Contains(out.String(), " 50 ") {
		t.Fatalf("healthy check: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	// Tear the tail: check reports it and fails; --repair fixes it.
	segs, _ := filepath.Glob(filepath.Join(dir, "p00"+string(rune('0'+p)), "0*"))
	last := segs[len(segs)-1]
	st, _ := os.Stat(last)
	os.Truncate(last, st.Size()-3)
	out.Reset()
	if code := dispatch([]string{"wal", "check", dir}, &out, &errOut); code != 1 || !strings.Contains(out.String(), "NEEDS REPAIR") {
		t.Fatalf("torn tail: exit %d\n%s", code, out.String())
	}
	out.Reset()
	if code := dispatch([]string{"wal", "check", dir, "--repair"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "(repaired)") || !strings.Contains(out.String(), " 49 ") {
		t.Fatalf("repair: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if code := dispatch([]string{"wal", "check", t.TempDir()}, &out, &errOut); code != 1 {
		t.Fatalf("not a data directory: exit %d", code)
	}
	if code := dispatch([]string{"wal"}, &out, &errOut); code != 2 {
		t.Fatalf("usage: exit %d", code)
	}
}
