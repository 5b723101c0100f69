package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestGroupsCommand: ls prints the API's groups, rm sends the delete (with
// the token and subject, flags before or after the name) and prints the
// node's reason when refused.
func TestGroupsCommand(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("Authorization"))
		switch {
		case r.Method == "GET":
			w.Write([]byte(`{"groups":[{"name":"work","subject":"telemetry.>","kind":"queue","nsq_channel":true,"members":{"gw1":2},"leader":"gw1","pending":3,"in_flight":1},
				{"name":"up","subject":"telemetry.>","kind":"uplink","declared":"uplinks[0]","members":{},"leader":"gw1"}]}`))
		case strings.HasPrefix(r.URL.Path, "/v1/groups/busy"):
			w.WriteHeader(409)
			w.Write([]byte(`{"error":"queue group has members: \"busy\" has 1 on gw1: stop its workers first"}`))
		default:
			w.Write([]byte(`{"deleted":{}}`))
		}
	}))
	defer srv.Close()
	for _, tc := range []struct {
		args      []string
		code      int
		out, req  string
		errSubstr string
	}{
		{[]string{"ls", "--http", srv.URL}, 0, "work  telemetry.>  queue/nsq  2@gw1", "GET /v1/groups ", ""},
		{[]string{"ls", "--http", srv.URL}, 0, "declared (uplinks[0])", "GET /v1/groups ", ""},
		{[]string{"rm", "old", "--http", srv.URL, "--token", "tk", "--subject", "telemetry.d1"}, 0, "deleted queue group old", "DELETE /v1/groups/old?subject=telemetry.d1 Bearer tk", ""},
		{[]string{"rm", "--http", srv.URL, "busy"}, 1, "", "DELETE /v1/groups/busy ", "has 1 on gw1"},
		{[]string{"rm", "--http", srv.URL}, 2, "", "", "usage"},
		{[]string{"frob"}, 2, "", "", "usage"},
	} {
		got = nil
		var out, errb bytes.Buffer
		code := runGroups(tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(out.String(), tc.out) || !strings.Contains(errb.String(), tc.errSubstr) ||
			tc.req != "" && (len(got) != 1 || got[0] != tc.req) {
			t.Fatalf("%v: code %d, out %q, err %q, requests %q", tc.args, code, out.String(), errb.String(), got)
		}
	}
}
