// Package mdns finds the edgeq gateways of a LAN by multicast DNS (RFC 6762)
// and DNS-SD (RFC 6763), and merges in statically configured peers for
// networks without multicast.
//
// Each node publishes one service instance of type _edgeq._tcp (Config.Service)
// named after its node ID, with
//
//	SRV  <id>._edgeq._tcp.local. → <id>.local.:<peer port>
//	TXT  txtvers=1 id=<id> cluster=<name> priority=<n> version=<v> port=<peer port>
//	A    <id>.local. → the addresses of the configured interface
//
// The records come from hashicorp/mdns (NewMDNSService) with an explicit host
// name and explicit addresses (never os.Hostname or net.LookupIP, which give
// unresolvable names and loopback addresses on Raspberry Pi OS).
//
// # Responder
//
// hashicorp's server answers every question by unicast, never announces and
// never says goodbye, so other stacks (avahi on every Pi image, Bonjour) see a
// node late and keep a dead one for two minutes. Responder is a small RFC 6762
// responder instead:
//
//   - one 0.0.0.0:5353 socket with SO_REUSEADDR and SO_REUSEPORT (as avahi
//     does), IP_MULTICAST_ALL off, 224.0.0.251 joined on the configured
//     interface only, IP TTL 255 for multicast and unicast;
//   - QM questions from port 5353 are answered by multicast, rate-limited to
//     one multicast of a record per second, after 20–120 ms when the answer
//     holds a shared record (the PTR), at once otherwise;
//   - QU questions are answered by unicast to the querier, unless the record
//     has not been multicast within a quarter of its TTL (RFC 6762 §5.4: then
//     it is multicast, to refresh every cache); direct unicast queries to port
//     5353 are answered by unicast;
//   - legacy queries (source port ≠ 5353, such as hashicorp's Query and
//     one-shot resolvers) get a conventional unicast DNS reply: the query ID
//     and question echoed, TTLs capped at 10 s, no cache-flush bits;
//   - known answers (TTL ≥ half of ours) are not repeated; response packets,
//     non-query opcodes, off-link senders and other classes are ignored;
//     questions of a type we do not have for our own names get an NSEC;
//   - two announcements 1 s apart at start (cache-flush bit on the unique SRV,
//     TXT, A and NSEC records; PTRs are shared) and a goodbye (TTL 0) at stop.
//
// TTL: every record has Config.TTL, 10 s by default. The RFC suggests 120 s
// for host records and 75 min for the rest; those numbers are what makes
// a crashed node linger in avahi for minutes. A gateway cluster wants a dead
// node gone from every cache within seconds, and a few gateways re-querying
// every 8 s (avahi refreshes at 80 % of the TTL) cost a handful of small
// packets. Goodbyes make a clean stop visible at once anyway.
//
// Probing (RFC 6762 §8.1) is not done: names are derived from node IDs, which
// are unique by construction. Answers are built once at Start: a changed
// interface address needs a restart of the Responder.
//
// # Browser
//
// Browser runs hashicorp's mdns.Query every BrowseInterval (buffered Entries
// channel closed by us, IPv6 off, explicit interface, a logger at debug
// level, a short timeout), keeps the entries of our service, cluster and not
// ourselves, and drops a peer not seen for ExpiryRounds rounds. Entries are
// read only after Query returns: hashicorp keeps writing to an entry it has
// already sent. The Browser also listens passively for multicast responses
// (a socket bound to 224.0.0.251:5353, so it never takes unicast meant for
// the Responder), so an announcement adds a peer and a goodbye removes it at
// once, between rounds.
//
// Known limit: during a Query (BrowseTimeout every BrowseInterval) hashicorp
// holds 0.0.0.0:5353 with SO_REUSEADDR only; bound last, it receives the
// unicast datagrams sent to this host's port 5353 (direct unicast queries,
// unicast replies to a local avahi's QU questions). Multicast is unaffected.
//
// All decisions — what to answer and how, suppression, rate limits, record
// sets, peer expiry — are pure code with the time passed in (answer.go,
// records.go, peers.go, passive.go) and are tested without sockets; the
// sockets live in socket.go, responder.go and browser.go.
//
// Only IPv4 is used for mDNS traffic: on a gateway IPv6 is often unrouted or
// half configured, and hashicorp's client fails a whole query when an IPv6
// send fails (GOTCHAS 2.2). IPv6 addresses are advertised only when the
// caller lists them in Node.Addrs.
package mdns
