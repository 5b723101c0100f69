package tlsfiles

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestClientErrors(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pem")
	os.WriteFile(junk, []byte("not a certificate"), 0o600)
	if _, err := Client(filepath.Join(dir, "missing.pem"), "", ""); err == nil || !strings.HasPrefix(err.Error(), "ca_file: ") {
		t.Errorf("missing CA: %v", err)
	}
	if _, err := Client(junk, "", ""); !errors.Is(err, ErrNoCertificates) {
		t.Errorf("junk CA: %v", err)
	}
	if _, err := Client("", junk, junk); err == nil || !strings.HasPrefix(err.Error(), "cert_file/key_file: ") {
		t.Errorf("junk client cert: %v", err)
	}
	tc, err := Client("", "", "")
	if err != nil || tc.RootCAs != nil || len(tc.Certificates) != 0 {
		t.Errorf("empty: %v %+v", err, tc)
	}
}
