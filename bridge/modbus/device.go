package modbus

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ErrorKind is why a request failed, as counted in status and metrics.
type ErrorKind int

// Error kinds.
const (
	errTimeout     ErrorKind = iota // no (complete) answer in time
	errCRC                          // RTU frame with a bad CRC
	errGarbled                      // a frame that is not the answer
	errException                    // the slave's exception response
	errLink                         // the port or connection failed
	errUnavailable                  // not tried: the port or connection is down
	numErrorKinds
)

var errorKindNames = [numErrorKinds]string{"timeout", "crc", "garbled", "exception", "link", "unavailable"}

func (k ErrorKind) String() string { return errorKindNames[k] }

// ErrorKinds lists the kinds in their fixed order, for metrics.
func ErrorKinds() []string { return errorKindNames[:] }

// ErrUnavailable: the request was not sent, the bus is down.
var ErrUnavailable = errors.New("bus unavailable")

func unavailable(last string) error {
	if last == "" {
		return ErrUnavailable
	}
	return fmt.Errorf("%w: %s", ErrUnavailable, last)
}

func kindOf(err error) ErrorKind {
	var ex *ExceptionError
	var le *linkError
	switch {
	case errors.As(err, &ex):
		return errException
	case errors.Is(err, ErrTimeout):
		return errTimeout
	case errors.Is(err, ErrCRC):
		return errCRC
	case errors.Is(err, ErrGarbled):
		return errGarbled
	case errors.Is(err, ErrUnavailable):
		return errUnavailable
	case errors.As(err, &le):
		return errLink
	}
	return errLink
}

// device is one slave's timetable, last values and counters. Only the bus
// goroutine touches the fields above the counters.
type device struct {
	cfg   Device
	index int
	sched sched
	cur   *poll // in progress (waiting for a retry), or nil
	p     poll  // reused
	plans map[string][]read

	// on_change state: what the last stored record said.
	sent       []Value
	sentOnce   bool
	sentAt     time.Time
	sentQual   string
	lastLogged string // last error logged, so a failing device logs once

	polls, failedPolls, requests, retries, unchanged atomic.Uint64
	errs                                             [numErrorKinds]atomic.Uint64
	lastLatency                                      atomic.Int64

	mu         sync.Mutex
	exceptions map[byte]uint64 // at most 256 codes
	lastGood   time.Time
	lastErr    string
	lastErrAt  time.Time
}

func newDevice(d Device, index int, now time.Time) *device {
	return &device{
		cfg:        d,
		index:      index,
		sched:      newSched(d, now),
		sent:       make([]Value, len(d.Registers)),
		exceptions: map[byte]uint64{},
		plans:      map[string][]read{},
		p: poll{
			values: make([]Value, len(d.Registers)),
			errs:   make([]error, len(d.Registers)),
		},
	}
}

// poll is one poll of a device: the registers due, the planned reads, and
// what each register gave.
type poll struct {
	start    time.Time
	groups   []int
	regs     []int
	reads    []read
	next     int // index of the read to send
	attempt  int // retries of reads[next] so far
	values   []Value
	errs     []error
	failed   int
	answered bool
	quality  ErrorKind // of the first failure
}

// begin starts a poll of the registers due at now.
func (d *device) begin(now time.Time) *poll {
	p := &d.p
	p.start = now
	p.groups, p.regs = d.sched.due(now)
	p.reads = d.planFor(p.groups, p.regs)
	p.next, p.attempt, p.failed, p.answered = 0, 0, 0, false
	for _, i := range p.regs {
		p.values[i], p.errs[i] = Value{}, nil
	}
	return p
}

// maxPlans bounds the plans kept per device: one per combination of due
// groups seen, and a device has few intervals.
const maxPlans = 16

// planFor returns the reads of the due registers, planned once per
// combination of due groups.
func (d *device) planFor(groups, regs []int) []read {
	key := fmt.Sprint(groups)
	if r, ok := d.plans[key]; ok {
		return r
	}
	r := plan(d.cfg.Registers, regs, d.cfg.MaxRegisters, d.cfg.MaxGap)
	if len(d.plans) < maxPlans {
		d.plans[key] = r
	}
	return r
}

// decode turns a read's data into its registers' values.
func (p *poll) decode(d *device, rd read, data []byte) {
	p.answered = true
	for _, i := range rd.regs {
		v, err := decodeValue(d.cfg.Registers[i], rd.addr, data)
		if err != nil {
			p.setErr(i, errGarbled, err)
			continue
		}
		p.values[i] = v
	}
}

// fail marks the registers of one read failed with err.
func (p *poll) fail(d *device, rd read, err error) {
	var ex *ExceptionError
	if errors.As(err, &ex) {
		p.answered = true // the slave is there, it just refuses these
		d.noteException(ex, rd)
	}
	for _, i := range rd.regs {
		p.setErr(i, kindOf(err), err)
	}
}

// failRest marks every register not read yet failed with err.
func (p *poll) failRest(err error) {
	k := kindOf(err)
	for ; p.next < len(p.reads); p.next++ {
		for _, i := range p.reads[p.next].regs {
			p.setErr(i, k, err)
		}
	}
}

func (p *poll) setErr(i int, k ErrorKind, err error) {
	if p.failed == 0 {
		p.quality = k
	}
	p.failed++
	p.errs[i] = err
}

// countError counts a failed request.
func (d *device) countError(k ErrorKind, err error) {
	d.errs[k].Add(1)
	d.mu.Lock()
	d.lastErr, d.lastErrAt = err.Error(), time.Now()
	d.mu.Unlock()
}

// noteException counts an exception by code and says which registers it
// was about: an exception almost always means a wrong register map.
func (d *device) noteException(ex *ExceptionError, rd read) {
	names := make([]string, 0, len(rd.regs))
	for _, i := range rd.regs {
		names = append(names, d.cfg.Registers[i].Name)
	}
	msg := fmt.Sprintf("%v reading %s %d..%d (%s)", ex, rd.fn, rd.addr, rd.addr+rd.qty-1, strings.Join(names, ", "))
	d.mu.Lock()
	d.exceptions[ex.Code]++
	d.lastErr, d.lastErrAt = msg, time.Now()
	d.mu.Unlock()
}

func (d *device) noteLatency(lat time.Duration) { d.lastLatency.Store(int64(lat)) }

func (d *device) noteGood(t time.Time) {
	d.mu.Lock()
	d.lastGood = t
	d.mu.Unlock()
}

// shouldStore decides, with on_change, whether a poll is worth a record: a
// value moved beyond its deadband, the quality changed, or the heartbeat is
// due. Without on_change every poll is stored.
func (d *device) shouldStore(p *poll) bool {
	if !d.cfg.OnChange || !d.sentOnce || d.quality(p) != d.sentQual {
		return true
	}
	if d.cfg.Heartbeat > 0 && p.start.Sub(d.sentAt) >= d.cfg.Heartbeat {
		return true
	}
	for _, i := range p.regs {
		if p.values[i].kind != kindNone && p.values[i].changed(d.sent[i], d.cfg.Registers[i].Deadband) {
			return true
		}
	}
	return false
}

// remember keeps what a stored record said, for on_change.
func (d *device) remember(p *poll) {
	d.sentOnce, d.sentAt, d.sentQual = true, p.start, d.quality(p)
	for _, i := range p.regs {
		if p.values[i].kind != kindNone {
			d.sent[i] = p.values[i]
		}
	}
}

// quality is the poll's quality field: empty when every register was read.
func (d *device) quality(p *poll) string {
	if p.failed == 0 {
		return ""
	}
	return p.quality.String()
}

// appendRecord appends the poll's JSON record: ts, the values by name in
// map order, and on failure quality and errors (register name → reason).
func (d *device) appendRecord(dst []byte, p *poll) []byte {
	dst = append(dst, `{"ts":"`...)
	dst = p.start.UTC().AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, '"')
	for _, i := range p.regs {
		if p.values[i].kind == kindNone {
			continue
		}
		dst = append(dst, ',', '"')
		dst = append(dst, d.cfg.Registers[i].Name...) // names are [A-Za-z0-9_.-]
		dst = append(dst, '"', ':')
		dst = p.values[i].appendJSON(dst)
	}
	if p.failed > 0 {
		dst = append(dst, `,"quality":"`...)
		dst = append(dst, p.quality.String()...)
		dst = append(dst, `","errors":{`...)
		first := true
		for _, i := range p.regs {
			if p.errs[i] == nil {
				continue
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = append(dst, '"')
			dst = append(dst, d.cfg.Registers[i].Name...)
			dst = append(dst, '"', ':')
			msg, _ := json.Marshal(p.errs[i].Error()) // failures only: no writer of our own
			dst = append(dst, msg...)
		}
		dst = append(dst, '}')
	}
	return append(dst, '}')
}
