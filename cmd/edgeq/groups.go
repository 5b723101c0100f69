package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"edgeq/gateway/apiv1"
)

// runGroups lists (ls) or deletes (rm NAME) queue groups through the node's
// HTTP API (GET /v1/groups, DELETE /v1/groups/{name}).
func runGroups(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "ls" && args[0] != "rm") {
		fmt.Fprintln(stderr, "usage: edgeq groups ls [--json] | edgeq groups rm [--subject FILTER] NAME   (flags: --http, --token, --tlsca)")
		return 2
	}
	fs := flag.NewFlagSet("groups "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("http", envOr("EDGEQ_HTTP", "http://127.0.0.1:8222"), "HTTP address of the node (also $EDGEQ_HTTP)")
	token := fs.String("token", os.Getenv("EDGEQ_HTTP_TOKEN"), "bearer token (also $EDGEQ_HTTP_TOKEN)")
	tlsCA := fs.String("tlsca", os.Getenv("EDGEQ_TLSCA"), "CA file an https:// node's certificate is checked against (also $EDGEQ_TLSCA)")
	raw := fs.Bool("json", false, "ls: print the raw JSON")
	subject := fs.String("subject", "", "rm: the group's subject filter, when several groups share the name")
	// Flags may follow the name too (edgeq groups rm NAME --token T).
	var pos []string
	for rest := args[1:]; ; {
		if err := fs.Parse(rest); err != nil {
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	client := &http.Client{Timeout: 30 * time.Second}
	if *tlsCA != "" {
		pem, err := os.ReadFile(*tlsCA)
		pool := x509.NewCertPool()
		if err != nil || !pool.AppendCertsFromPEM(pem) {
			fmt.Fprintf(stderr, "edgeq groups: --tlsca %s: no PEM certificate (%v)\n", *tlsCA, err)
			return 2
		}
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	do := func(method, path string) ([]byte, error) {
		req, err := http.NewRequest(method, strings.TrimRight(*base, "/")+path, nil)
		if err != nil {
			return nil, err
		}
		if *token != "" {
			req.Header.Set("Authorization", "Bearer "+*token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			var e struct {
				Error string `json:"error"`
			}
			if json.Unmarshal(body, &e) == nil && e.Error != "" {
				return nil, fmt.Errorf("%s", e.Error)
			}
			return nil, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
		}
		return body, nil
	}
	if args[0] == "rm" {
		if len(pos) != 1 {
			fmt.Fprintln(stderr, "usage: edgeq groups rm [--subject FILTER] NAME")
			return 2
		}
		path := "/v1/groups/" + url.PathEscape(pos[0])
		if *subject != "" {
			path += "?subject=" + url.QueryEscape(*subject)
		}
		if _, err := do("DELETE", path); err != nil {
			fmt.Fprintf(stderr, "edgeq groups rm: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "deleted queue group %s\n", pos[0])
		return 0
	}
	if len(pos) != 0 {
		fmt.Fprintln(stderr, "usage: edgeq groups ls [--json]")
		return 2
	}
	body, err := do("GET", "/v1/groups")
	if err != nil {
		fmt.Fprintf(stderr, "edgeq groups ls: %v\n", err)
		return 1
	}
	if *raw {
		stdout.Write(body)
		return 0
	}
	var ans apiv1.GroupList
	if err := json.Unmarshal(body, &ans); err != nil {
		fmt.Fprintf(stderr, "edgeq groups ls: %v\n", err)
		return 1
	}
	printGroups(stdout, ans.Groups)
	return 0
}

// printGroups writes one line per group: name, subject, kind, members by
// node, where it is declared or when it expires.
func printGroups(w io.Writer, gs []apiv1.GroupInfo) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSUBJECT\tKIND\tMEMBERS\tLEADER\tPENDING\tIN FLIGHT\tLIFETIME")
	for _, g := range gs {
		kind := g.Kind
		if g.NSQChannel && kind == "queue" {
			kind = "queue/nsq"
		}
		nodes := make([]string, 0, len(g.Members))
		for n, c := range g.Members {
			nodes = append(nodes, fmt.Sprintf("%d@%s", c, n))
		}
		sort.Strings(nodes)
		members := strings.Join(nodes, ",")
		if members == "" {
			members = "0"
		}
		life := "while it has members"
		switch {
		case g.Declared != "":
			life = "declared (" + g.Declared + ")"
		case g.Expires != nil:
			life = "expires " + g.Expires.Local().Format(time.DateTime)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", g.Name, g.Subject, kind, members, g.Leader, g.Pending, g.InFlight, life)
	}
	tw.Flush()
}
