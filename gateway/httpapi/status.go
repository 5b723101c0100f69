package httpapi

import (
	"encoding/json"
	"time"

	"edgeq/gateway/apiv1"
	"edgeq/gateway/console"
	"edgeq/gateway/devicemetrics"
	"edgeq/gateway/nodestats"
)

// statusTopDevices is how many busy devices /v1/status lists.
const statusTopDevices = 10

// Status builds the status document from one snapshot, the same one
// /metrics renders: the two never disagree about a moment.
func (s *Server) Status() apiv1.Status {
	snap := s.node.Snapshot(statusTopDevices, true)
	st := statusOf(&snap)
	st.DataDir, st.NATS, st.HTTP, st.Durability = s.cfg.DataDir, s.node.NATSAddr(), s.Addr(), s.cfg.Durability
	st.NSQ = nsqStatusOf(snap.NSQ, s.node.NSQAddr())
	return st
}

// StatusFrame is one /v1/events frame: the /v1/status document.
func (s *Server) StatusFrame() ([]byte, error) {
	b, err := json.Marshal(s.Status())
	if err != nil {
		return nil, err
	}
	return console.Frame("status", b), nil
}

// statusOf turns a snapshot into the status document (without the node's
// addresses and settings).
func statusOf(s *nodestats.Snapshot) apiv1.Status {
	ls := s.Log
	st := apiv1.Status{
		Node: s.Node, Version: s.Version, Time: s.Time, UptimeSeconds: int64(s.Time.Sub(s.StartTime).Seconds()), Ready: s.Ready,
		Log: apiv1.LogStatus{Bytes: ls.Bytes, MaxBytes: ls.MaxBytes, Full: ls.Full, FullPolicy: string(ls.FullPolicy), Devices: ls.Devices,
			MaxDevices: ls.MaxDevices, Rejected: ls.Rejected, DiskLow: ls.DiskLow, DiskFault: ls.DiskFault},
		Sources: map[string]apiv1.Source{},
		Device:  devicemetrics.Health(s.Device),
	}
	for _, p := range ls.Partitions {
		st.Log.RetentionDropped += p.Dropped
		st.Partitions = append(st.Partitions, apiv1.PartitionStatus{Partition: p.Partition, Hot: p.Hot, First: p.First,
			Last: p.Last, Durable: p.Durable, Bytes: p.Bytes, Appends: p.Appends, Fsyncs: p.Fsyncs,
			Corrupt: p.Corrupt, Dropped: p.Dropped, FsyncP99ms: ms(p.FsyncLatency.Quantile(0.99))})
	}
	for _, g := range s.Groups {
		gs := apiv1.GroupStatus{Filter: g.Key.Filter, Queue: g.Key.Queue, Declared: g.Declared,
			Members: g.Core.Members, InFlight: g.Core.InFlight, Pending: g.Core.Pending,
			Delivered: g.Core.Delivered, Acked: g.Core.Acked, Naks: g.Core.Naks,
			Redeliveries: g.Core.Redeliveries, DeadLetters: g.Core.DeadLetters, Active: g.Core.ActiveDevices,
			LatencyP50ms: ms(g.RecentLatency.Quantile(0.5)), LatencyP99ms: ms(g.RecentLatency.Quantile(0.99)),
			PartitionLag: map[string]uint64{}, WindowSpan: map[string]int{}, Window: map[string]apiv1.WindowStatus{},
			StallsAvoided: g.Core.StallsAvoided, Leading: g.Leading, Forwards: g.Forwards}
		if len(g.Members) > 0 {
			gs.MembersByNode = g.Members
		}
		if !g.Leading {
			gs.Members = 0
			for _, n := range g.Members {
				gs.Members += n
			}
		}
		for _, p := range g.Core.Partitions {
			name, lag := s.GroupPartition(&g, p.Partition, p.Committed)
			if lag > 0 {
				gs.Lag += lag
				gs.PartitionLag[name] = lag
			}
			gs.WindowSpan[name] = p.Span
			gs.Window[name] = apiv1.WindowStatus{Messages: p.Held, Busiest: p.Busiest, SetAside: p.SetAside}
		}
		for _, m := range g.Core.MemberList {
			gs.MemberList = append(gs.MemberList, apiv1.MemberStatus{ID: string(m.ID), Credit: m.Credit, InFlight: m.InFlight})
		}
		st.Groups = append(st.Groups, gs)
	}
	st.Hot = apiv1.HotStatus{Enabled: s.Hot.Enabled, Tracked: s.Hot.Tracked, Isolated: s.Hot.Isolated, Moves: s.Hot.Moves, MoveErrors: s.Hot.MoveErrors}
	for _, d := range s.TopDevices {
		st.HotDevices = append(st.HotDevices, apiv1.DeviceStatus{Device: d.Device, Rate: d.Rate, Hot: d.Hot})
	}
	for _, c := range s.Sources {
		st.Sources[c.Name] = apiv1.Source{Msgs: c.Msgs, Bytes: c.Bytes, Errors: c.Errors}
	}
	cs := s.NATS
	st.Connections = apiv1.ConnStatus{Current: cs.Connections, Total: cs.TotalConnections,
		AuthFailures: cs.AuthFailures, SlowConsumers: cs.SlowConsumers,
		WriteTimeouts: cs.WriteTimeouts, Stale: cs.Stale, ProtocolErrs: cs.ProtocolErrors}
	st.Serial = s.Serial
	st.MQTT = s.MQTT
	for _, b := range s.Modbus {
		st.Modbus = append(st.Modbus, b.ModbusStatus)
	}
	for _, u := range s.Uplinks {
		st.Uplinks = append(st.Uplinks, u.UplinkStatus)
	}
	st.Tail = apiv1.TailStatus{Subscribers: s.Tail.Subscribers, Delivered: s.Tail.Delivered, Dropped: s.Tail.Dropped}
	if s.Cluster != nil {
		st.Cluster = clusterStatusOf(s.Cluster, s.Dispatch)
	}
	return st
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func nsqStatusOf(n *nodestats.NSQStats, listen string) *apiv1.NSQStatus {
	if n == nil {
		return nil
	}
	st := &apiv1.NSQStatus{Listen: listen, Connections: n.Connections, RDY: n.RDY, InFlight: n.InFlight, RdyExceeded: n.RdyExceeded,
		Published: n.Published, PublishErrors: n.PublishErrors, Delivered: n.Delivered, Fin: n.Fin, Req: n.Req, Touch: n.Touch,
		UnknownIDs: n.UnknownIDs, SlowConsumers: n.SlowConsumers, TLSFailures: n.TLSFailures, Errors: map[string]uint64{}}
	for _, c := range n.Errors {
		st.Errors[c.Reason] = c.N
	}
	return st
}
