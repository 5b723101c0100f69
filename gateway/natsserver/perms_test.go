package natsserver

import "testing"

func TestCoversAndOverlaps(t *testing.T) {
	for _, c := range []struct {
		a, b            string
		covers, overlap bool
	}{
		{"telemetry.>", "telemetry.>", true, true},
		{"telemetry.>", "telemetry.*", true, true},
		{"telemetry.>", "telemetry.a.b", true, true},
		{"telemetry.>", "telemetry", false, false},
		{"telemetry.*", "telemetry.>", false, true},
		{"telemetry.*", "telemetry.a", true, true},
		{"telemetry.a", "telemetry.*", false, true},
		{"telemetry.a", "telemetry.b", false, false},
		{">", "a.b.c", true, true},
		{"*.x", ">", false, true},
		{"a.*.c", "a.b.c", true, true},
		{"a.*.c", "a.b.d", false, false},
		{"a.b", "a.b.c", false, false},
	} {
		if got := covers(c.a, c.b); got != c.covers {
			t.Errorf("covers(%q, %q) = %v", c.a, c.b, got)
		}
		if got := overlaps(c.a, c.b); got != c.overlap {
			t.Errorf("overlaps(%q, %q) = %v", c.a, c.b, got)
		}
		if overlaps(c.a, c.b) != overlaps(c.b, c.a) {
			t.Errorf("overlaps(%q, %q) not symmetric", c.a, c.b)
		}
	}
}

func TestPermissions(t *testing.T) {
	p := &Permissions{
		Publish:   Rules{Allow: []string{"telemetry.plant-1-*", "telemetry.>"}, Deny: []string{"telemetry.admin"}},
		Subscribe: Rules{Allow: []string{"telemetry.>", "_INBOX.>"}, Deny: []string{"telemetry.secret.>"}},
	}
	for subj, want := range map[string]bool{"telemetry.d1": true, "telemetry.admin": false, "other.x": false,
		"$EQ.ACK.x.1": true, "$EQ.RDY.3": true} {
		if p.mayPublish(subj) != want {
			t.Errorf("publish %s: want %v", subj, want)
		}
	}
	for f, want := range map[string]bool{"telemetry.>": false, "telemetry.d1": true, "telemetry.secret.x": false,
		"telemetry.*": true, "_INBOX.abc.*": true, ">": false, "other": false} {
		if p.maySubscribe(f) != want {
			t.Errorf("subscribe %s: want %v", f, want)
		}
	}
	var none *Permissions
	if !none.mayPublish("x") || !none.maySubscribe(">") {
		t.Fatal("no permissions must allow all")
	}
}
