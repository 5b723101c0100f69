package httpapi

import (
	"edgeq/gateway/apiv1"
	"edgeq/gateway/cluster"
	"edgeq/gateway/groups"
)

// clusterStatusOf is the cluster part of /v1/status from a snapshot's.
func clusterStatusOf(cs *cluster.Stats, d groups.Counters) *apiv1.ClusterStatus {
	el, m := cs.Election, cs.Manager
	st := &apiv1.ClusterStatus{Name: cs.Name, Listen: cs.Listen, Peers: cs.Peers, Unreachable: cs.Unreachable,
		Leaders: make(map[string]apiv1.GroupLeader, len(cs.Leaders)), Refused: m.Refused,
		PeerEvents: apiv1.PeerEvents{RefusedHandshakes: m.Refused, SendQueueOverflows: m.Overflows, Ups: m.Ups, Downs: m.Downs,
			RefusedFrames: m.FramesRefused, BusyHandshakes: m.HandshakesBusy, FailedHandshakes: m.HandshakeFailures},
		Election: apiv1.ElectionEvents{Elections: el.Elections, Leaderships: el.Leaderships, TakeOvers: el.TakeOvers,
			HandOverTimeouts: el.HandOverTimeouts, HandOvers: el.HandOvers, DrainTimeouts: el.DrainTimeouts,
			Deposed: el.Deposed, StaleCoordinators: el.Stale, Fenced: el.Fenced},
		DataPath: apiv1.DataPathEvents{ForwardsIn: d.ForwardsIn, ForwardsRefused: d.ForwardsRefused, AcksRelayed: d.AcksRelayed,
			RemoteCommits: d.RemoteCommits, RemoteCommitFailures: d.RemoteCommitFailures, FencedRequests: cs.FencedRequests},
	}
	// Lists are [] rather than null in the JSON.
	if st.Peers == nil {
		st.Peers = []apiv1.PeerStatus{}
	}
	if st.Unreachable == nil {
		st.Unreachable = []apiv1.AddrStatus{}
	}
	for k, l := range cs.Leaders {
		st.Leaders[k.String()] = apiv1.GroupLeader{Leader: l.Node, Epoch: l.Epoch.String(), Self: l.Self}
	}
	return st
}
