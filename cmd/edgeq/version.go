package main

import (
	"fmt"
	"io"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
)

// Stamped by the Makefile with -ldflags -X.
var (
	version   = "dev"
	commit    = "unknown"
	buildDate = "unknown"
)

// baseVersion is the release being worked on; untagged builds report
// baseVersion-dev+<commit>.
const baseVersion = "0.3.0"

var semverRE = regexp.MustCompile(`^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// semver is the version the node announces (NATS INFO, mDNS, status):
// always MAJOR.MINOR.PATCH[-pre][+build], since clients such as nats.js
// refuse anything else. A tag (v1.2.3) is used as it is; anything else
// (a bare commit from git describe, "dev" from a plain go build) becomes
// baseVersion-dev+<commit>.
func semver(v, rev string) string {
	if semverRE.MatchString(v) {
		return strings.TrimPrefix(v, "v")
	}
	switch {
	case v != "" && v != "dev":
		rev = v // git describe output such as 1a2b3c4-dirty
	case rev == "" || rev == "unknown":
		rev = vcsRevision()
	}
	build := strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '-' || r == '.' {
			return r
		}
		return '-'
	}, rev)
	build = strings.Trim(build, ".-")
	if build == "" {
		return baseVersion + "-dev"
	}
	return baseVersion + "-dev+" + build
}

// vcsRevision is the commit go build stamped (empty outside a checkout).
func vcsRevision() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value[:min(len(s.Value), 7)]
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" && dirty {
		rev += "-dirty"
	}
	return rev
}

func runVersion(_ []string, stdout, _ io.Writer) int {
	fmt.Fprintf(stdout, "edgeq %s (commit %s, built %s, %s, %s/%s)\n",
		semver(version, commit), commit, buildDate, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return 0
}
