package main

import "testing"

func TestPubAckError(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"node":"n1","partition":0,"offset":1,"seq":1}`, ""},
		{`{"stream":"TELEMETRY","seq":3,"node":"n1"}`, ""},
		{`{"error":"invalid device ID: empty"}`, "invalid device ID: empty"},
		{`{"error":{"code":400,"err_code":10003,"description":"edgeq: subject telemetry.a.b: invalid device ID"}}`, "edgeq: subject telemetry.a.b: invalid device ID (400)"},
		{`{"error":{"code":503}}`, `{"code":503}`},
		{`{"error":null}`, ""},
		{`not json`, ""},
	} {
		if got := pubAckError([]byte(c.in)); got != c.want {
			t.Errorf("pubAckError(%s) = %q, want %q", c.in, got, c.want)
		}
	}
}
