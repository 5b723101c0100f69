package queue

import "slices"

// The device window in the randomized model (TestRandomInterleavings'
// per_device_window_* configurations): records of a device in flight
// together are at most the window, all with one member, in lane order, and
// after a failure of one of them (nak, expiry, its member leaving or
// pausing) nothing more of the device goes out until none of it is in
// flight; every delivery is of the oldest unfinished record of its device
// on its node, or follows in flight ones.

// windowModel is the model's state for the window checks.
type windowModel struct {
	// stopped: devices that had a failure while others of theirs were in
	// flight; cleared at their next delivery with none in flight.
	stopped map[string]bool
}

// windowSeeds returns 1/div of seeds (at least 3), all of them for div <= 1.
func windowSeeds(seeds []uint64, div int) []uint64 {
	if div <= 1 || len(seeds) <= 3 {
		return seeds
	}
	return seeds[:max(3, len(seeds)/div)]
}

// setDeviceWindow rebuilds the model's (still empty) group with a device window.
// A window of at least 24 records and a device share of at least the
// device window let runs grow.
func (m *model) setDeviceWindow(w int) {
	m.cfg.DeviceWindow = w
	m.cfg.ReadAheadMsgs = max(m.cfg.ReadAheadMsgs, 24)
	m.cfg.ReadAheadBytes = max(m.cfg.ReadAheadBytes, 24*maxModelRecord/2)
	if m.cfg.DeviceShareMsgs > 0 {
		m.cfg.DeviceShareMsgs = max(m.cfg.DeviceShareMsgs, w)
		m.cfg.DeviceShareBytes = max(m.cfg.DeviceShareBytes, w*maxModelRecord)
	}
	m.win = &windowModel{stopped: map[string]bool{}}
	m.build()
}

// windowFailed notes a failure of devices' in-flight records (already
// removed from m.flight): a device with others still in flight is stopped.
func (m *model) windowFailed(devices ...string) {
	if m.win == nil {
		return
	}
	for _, dev := range devices {
		if slices.ContainsFunc(m.flight, func(f flight) bool { return f.device == dev }) {
			m.win.stopped[dev] = true
		}
	}
}

// windowPaused notes that member paused: its runs stop.
func (m *model) windowPaused(member MemberID) {
	if m.win == nil {
		return
	}
	for _, f := range m.flight {
		if f.member == member {
			m.win.stopped[f.device] = true
		}
	}
}

// checkWindowDelivery checks delivery d of rec against the window rules.
func (m *model) checkWindowDelivery(d Delivery, rec Msg, key devKey) {
	ref := d.Msg.Ref()
	var with []flight
	for _, f := range m.flight {
		if f.device == rec.Device && f.ref != ref {
			with = append(with, f)
		}
	}
	if len(with) == 0 {
		delete(m.win.stopped, rec.Device)
	} else if m.win.stopped[rec.Device] {
		m.fail("delivered %s of %s after a failure while %d of it are still in flight", ref, rec.Device, len(with))
	}
	if len(with)+1 > m.cfg.DeviceWindow {
		m.fail("delivered %s of %s: %d of it in flight, window %d", ref, rec.Device, len(with)+1, m.cfg.DeviceWindow)
	}
	inFlight := map[Ref]bool{}
	for _, f := range with {
		if f.member != d.Member {
			m.fail("delivered %s of %s to %s while %s of it is with %s", ref, rec.Device, d.Member, f.ref, f.member)
		}
		o, _ := m.store.record(f.ref)
		if nodeOf(f.ref.Partition) != key.node || o.Seq >= rec.Seq {
			m.fail("delivered %s (%s#%d) while %s (#%d) is in flight: not behind it", ref, rec.Device, rec.Seq, f.ref, o.Seq)
		}
		inFlight[f.ref] = true
	}
	// Every earlier record of the device on its node is finished, gone or in flight with the run.
	for _, p := range m.parts {
		if nodeOf(p) != key.node {
			continue
		}
		for _, r := range m.store.parts[p].recs {
			if r.Kind == KindData && r.Device == rec.Device && r.Seq < rec.Seq &&
				!m.finished[r.Ref()] && !m.dropped[r.Ref()] && !inFlight[r.Ref()] {
				m.fail("delivered %s#%d (%s, try %d) before #%d (%s) finished or went out",
					rec.Device, rec.Seq, ref, d.Deliveries, r.Seq, r.Ref())
			}
		}
	}
	m.counts["window deliveries"]++
	if len(with) > 0 {
		m.counts["window deliveries behind others"]++
	}
	if len(with)+1 == m.cfg.DeviceWindow {
		m.counts["window deliveries filling the window"]++
	}
}
