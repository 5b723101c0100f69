package main

import "testing"

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
	if got := semver("dev", ""); !semverRE.MatchString(got) {
		t.Errorf("plain go build: %q is not semver", got)
	}
}
