package groups

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// importsOf returns the import paths of the Go files (tests included) that
// match pattern, relative to this package's directory.
func importsOf(t *testing.T, pattern string) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files match %s (%v)", pattern, err)
	}
	out := map[string][]string{}
	for _, f := range files {
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range af.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			out[p] = append(out[p], f)
		}
	}
	return out
}

// TestOnlyDoor: groups is the only door to the queue core. Front ends,
// uplinks, the cluster layer and the configuration name members, policies
// and statistics with groups' types and never import gateway/queue; groups
// imports no protocol package (the subject grammar is gateway/subject's).
func TestOnlyDoor(t *testing.T) {
	for _, pattern := range []string{"../natsserver/*.go", "../nsqserver/*.go", "../jsapi/*.go", "../cluster/*.go",
		"../config/*.go", "../../bridge/uplink/*.go", "../uplinks*.go"} {
		if files := importsOf(t, pattern)["edgeq/gateway/queue"]; len(files) > 0 {
			t.Errorf("%v import gateway/queue: use groups' types (types.go)", files)
		}
	}
	for p, files := range importsOf(t, "*.go") {
		for _, proto := range []string{"natsproto", "natsserver", "nsqserver", "jsapi", "cluster", "bridge/"} {
			if strings.HasPrefix(p, "edgeq/") && strings.Contains(p, proto) {
				t.Errorf("%v import %s: groups speaks no protocol", files, p)
			}
		}
	}
}
