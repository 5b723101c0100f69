// Package cluster is everything between edgeq gateways of one LAN:
//
//   - the peer protocol: framing (frame.go), mutual authentication with the
//     cluster secret (auth.go), every frame sealed with keys bound to the
//     handshake (seal.go), one connection per peer pair with heartbeats,
//     bounded send queues, pre-auth limits and dialing (peers.go, Manager);
//   - the election of a leader per queue group over those connections
//     (elector.go, around the pure machine in discovery/election);
//   - the data path (link.go): the registry's groups.Peers — positions,
//     long-poll fetches, commits, forwarded deliveries, relayed
//     acknowledgements, member lists and dead letters (messages in wire.go)
//     — and the serving of the same requests from other nodes, fenced by
//     epoch;
//   - Node (node.go), which joins a gateway to its cluster: the manager,
//     the elector, mDNS discovery (discovery/mdns) and the startup grace,
//     and the snapshot that status and metrics show.
//
// What a leader does with other nodes' partitions while it runs a group
// (positioning, pausing an unreachable owner, commits at owners) is part of
// running the group and lives with the runner in gateway/groups
// (remote.go), behind the Peers interface this package implements.
package cluster
