package subject

import "testing"

// FuzzMatch checks Match and the validators against the
// obvious split-based definitions, for strings and bytes alike.
func FuzzMatch(f *testing.F) {
	for _, s := range [][2]string{
		{"foo.*", "foo.bar"}, {"foo.>", "foo.bar.baz"}, {">", "a"}, {"a.>.b", "a.x.b"},
		{"foo..bar", "foo..bar"}, {"*", ""}, {"a*b", "a*b"}, {"telemetry.>", "telemetry"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, filter, subject string) {
		got := Match(filter, subject)
		if want := referenceMatch(filter, subject); got != want {
			t.Fatalf("Match(%q, %q) = %v, reference says %v", filter, subject, got, want)
		}
		if Match([]byte(filter), []byte(subject)) != got {
			t.Fatalf("Match on bytes disagrees for %q, %q", filter, subject)
		}
		if v := ValidFilter(filter); v != referenceValid(filter, true) {
			t.Fatalf("ValidFilter(%q) = %v", filter, v)
		}
		if v := ValidPublish(subject); v != referenceValid(subject, false) {
			t.Fatalf("ValidPublish(%q) = %v", subject, v)
		}
		if ValidPublish(filter) && ValidPublish(subject) && got != (filter == subject) {
			t.Fatalf("literal filter %q vs %q: match %v", filter, subject, got)
		}
	})
}
