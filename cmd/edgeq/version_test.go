package main

import (
	"regexp"
	"testing"

	"edgeq/gateway/natsserver"
)

func TestSemver(t *testing.T) {
	cases := []struct{ v, rev, want string }{
		{"v1.2.3", "abc1234", "1.2.3"},
		{"1.2.3-rc.1+x", "abc1234", "1.2.3-rc.1+x"},
		{"abc1234", "abc1234", "0.3.0-dev+abc1234"},
		{"abc1234-dirty", "abc1234", "0.3.0-dev+abc1234-dirty"},
		{"v1.2.3-4-gabc1234-dirty", "abc1234", "1.2.3-4-gabc1234-dirty"}, // git describe past a tag: still semver
		{"dev", "abc1234", "0.3.0-dev+abc1234"},
		{"dev", "x/y z", "0.3.0-dev+x-y-z"},
	}
	for _, c := range cases {
		got := semver(c.v, c.rev)
		if got != c.want || !semverRE.MatchString(got) {
			t.Errorf("semver(%q, %q) = %q, want %q", c.v, c.rev, got, c.want)
		}
	}
	// A plain go build: with -buildvcs=false (as CI sets it), outside a
	// checkout or in a shallow clone there may be no commit at all; any
	// of these is semver. Nothing here depends on the repository's tags.
	for _, rev := range []string{"", "unknown", vcsRevision()} {
		if got := semver("dev", rev); !semverRE.MatchString(got) {
			t.Errorf("plain go build (rev %q): %q is not semver", rev, got)
		}
	}
}

// jsVersionRE is how nats.js 2.x reads the server version (semver.js
// parseSemVer); it turns its consumers API off below 2.9.4.
var jsVersionRE = regexp.MustCompile(`(\d+).(\d+).(\d+)`)

// TestInfoVersion: what every kind of build announces in NATS INFO is
// semver, reads as 2.10.0 to nats.js and nats.go, and keeps edgeq's own
// version in its build metadata.
func TestInfoVersion(t *testing.T) {
	cases := []struct{ v, rev, want string }{
		{"v0.3.0", "", "2.10.0+edgeq.0.3.0"},
		{"dev", "9616b3d", "2.10.0+edgeq.0.3.0-dev.9616b3d"},
		{"9616b3d-dirty", "", "2.10.0+edgeq.0.3.0-dev.9616b3d-dirty"},
		{"v1.2.3-4-gabc1234-dirty", "", "2.10.0+edgeq.1.2.3-4-gabc1234-dirty"},
		{"1.2.3-rc.1+x.y", "", "2.10.0+edgeq.1.2.3-rc.1.x.y"},
		{"dev", "", ""}, // -buildvcs=false: no commit to show; checked for shape only
		{"dev", "unknown", ""},
	}
	for _, c := range cases {
		edgeq := semver(c.v, c.rev)
		got := natsserver.InfoVersion(edgeq)
		if c.want != "" && got != c.want {
			t.Errorf("InfoVersion(semver(%q, %q)) = %q, want %q", c.v, c.rev, got, c.want)
		}
		if !semverRE.MatchString(got) {
			t.Errorf("INFO version %q (edgeq %q) is not semver", got, edgeq)
		}
		if m := jsVersionRE.FindStringSubmatch(got); m == nil || m[0] != natsserver.NATSCompatVersion {
			t.Errorf("nats.js reads %q as %v, want %s", got, m, natsserver.NATSCompatVersion)
		}
	}
	// Odd input still gives semver: empty identifiers dropped, bad bytes replaced.
	for v, want := range map[string]string{"": "2.10.0+edgeq", "a..b+": "2.10.0+edgeq.a.b", "1.0 x/y": "2.10.0+edgeq.1.0-x-y"} {
		if got := natsserver.InfoVersion(v); got != want || !semverRE.MatchString(got) {
			t.Errorf("InfoVersion(%q) = %q, want %q", v, got, want)
		}
	}
}
