package fsutil

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	for _, content := range []string{"one", "two, longer"} {
		if err := WriteFileAtomic(p, []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != content {
			t.Fatalf("read back %q %v", got, err)
		}
	}
	if _, err := os.Stat(p + ".tmp"); !os.IsNotExist(err) {
		t.Fatal("temp file left behind")
	}
	if err := WriteFileAtomic(filepath.Join(dir, "missing", "f"), nil, 0o640); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
	if err := SyncDir(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("sync of a missing directory succeeded")
	}
}
