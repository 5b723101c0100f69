package mqttsession

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden transcripts in testdata")

// driver runs a script against one of each state machine, on a fake clock
// (times in a script are seconds after t0), and writes what each step
// returned. Every run of a script is byte-identical.
type driver struct {
	ka  KeepAlive
	in  *Inbound
	out *Outbound[string]
	w   Will
}

var t0 = time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)

func at(s string) time.Time { return t0.Add(secs(s)) }

func secs(s string) time.Duration {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		panic(fmt.Sprintf("bad seconds %q", s))
	}
	return time.Duration(f * float64(time.Second))
}

func num(s string) int {
	n, err := strconv.ParseUint(s, 0, 16)
	if err != nil {
		panic(fmt.Sprintf("bad number %q", s))
	}
	return int(n)
}

func errText(err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return ""
}

func (d *driver) step(f []string) string {
	switch f[0] {
	case "keepalive": // keepalive <seconds> <at>
		d.ka = NewKeepAlive(uint16(num(f[1])), at(f[2]))
		dl, ok := d.ka.Deadline()
		if !ok {
			return "no deadline"
		}
		return "deadline " + dl.Sub(t0).String()
	case "effective": // effective <asked> <server max>
		ka, override := EffectiveKeepAlive(uint16(num(f[1])), uint16(num(f[2])))
		return fmt.Sprintf("keepalive %d override %v", ka, override)
	case "seen":
		d.ka.Seen(at(f[1]))
		dl, _ := d.ka.Deadline()
		return "deadline " + dl.Sub(t0).String()
	case "expired":
		return fmt.Sprint(d.ka.Expired(at(f[1])))

	case "inbound": // inbound <receive maximum>
		d.in = NewInbound(uint16(num(f[1])))
		return ""
	case "publish": // publish <qos> <id>
		a, err := d.in.Publish(byte(num(f[1])), uint16(num(f[2])))
		if err != nil {
			return errText(err)
		}
		return fmt.Sprintf("%s (in flight %d)", a, d.in.InFlight())
	case "stored":
		return fmt.Sprintf("%s (in flight %d)", d.in.Stored(uint16(num(f[1]))), d.in.InFlight())
	case "refused":
		d.in.Refused(uint16(num(f[1])))
		return fmt.Sprintf("in flight %d", d.in.InFlight())
	case "pubrel":
		a, err := d.in.Pubrel(uint16(num(f[1])))
		if err != nil {
			return errText(err)
		}
		return fmt.Sprintf("%s (in flight %d)", a, d.in.InFlight())
	case "recorded":
		return fmt.Sprint(d.in.Recorded())
	case "restart": // a node restart: a new Inbound from the saved IDs
		saved := d.in.Recorded()
		d.in = NewInbound(uint16(num(f[1])))
		d.in.Restore(saved)
		return fmt.Sprintf("restored %v", saved)

	case "outbound": // outbound <receive maximum>
		d.out = NewOutbound[string](uint16(num(f[1])))
		return ""
	case "window":
		d.out.SetWindow(uint16(num(f[1])))
		return fmt.Sprintf("can send %v", d.out.CanSend())
	case "send": // send <qos> <handle>
		id, err := d.out.Send(byte(num(f[1])), f[2])
		if err != nil {
			return errText(err)
		}
		return fmt.Sprintf("id %d (in flight %d)", id, d.out.InFlight())
	case "puback":
		h, ok := d.out.Puback(uint16(num(f[1])))
		return fmt.Sprintf("done %q %v (in flight %d)", h, ok, d.out.InFlight())
	case "pubrec": // pubrec <id> <reason>
		h, rel, done, known := d.out.Pubrec(uint16(num(f[1])), byte(num(f[2])))
		return fmt.Sprintf("handle %q pubrel %v done %v known %v (in flight %d)", h, rel, done, known, d.out.InFlight())
	case "pubcomp":
		h, ok := d.out.Pubcomp(uint16(num(f[1])))
		return fmt.Sprintf("done %q %v (in flight %d)", h, ok, d.out.InFlight())
	case "resends":
		var parts []string
		for _, r := range d.out.Resends() {
			kind := "PUBLISH dup"
			if r.Pubrel {
				kind = "PUBREL"
			}
			parts = append(parts, fmt.Sprintf("%s id=%d qos=%d %s", kind, r.ID, r.QoS, r.Handle))
		}
		return strings.Join(parts, "; ")
	case "drop":
		return fmt.Sprint(d.out.Drop())

	case "will": // will <present> <delay seconds>
		d.w = NewWill(f[1] == "yes", secs(f[2]))
		return ""
	case "closed": // closed <kind> <at> <session expiry seconds>
		kind := map[string]CloseKind{"normal": CloseNormal, "with-will": CloseWithWill, "abnormal": CloseAbnormal}[f[1]]
		sched := d.w.Closed(kind, at(f[2]), secs(f[3]))
		due, _ := d.w.Deadline()
		if !sched {
			return "no will"
		}
		return "will due at " + due.Sub(t0).String()
	case "resumed":
		return fmt.Sprintf("cancelled %v", d.w.Resumed(at(f[1])))
	case "due":
		return fmt.Sprintf("publish %v", d.w.Due(at(f[1])))
	}
	panic("unknown command " + f[0])
}

// TestTranscripts runs each testdata/*.script and compares what it
// returned with testdata/*.golden (go test -run TestTranscripts -update
// rewrites them; read the diff before committing it).
func TestTranscripts(t *testing.T) {
	scripts, _ := filepath.Glob("testdata/*.script")
	if len(scripts) == 0 {
		t.Fatal("no scripts")
	}
	for _, script := range scripts {
		t.Run(filepath.Base(script), func(t *testing.T) {
			src, err := os.ReadFile(script)
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			d := &driver{}
			for _, line := range strings.Split(strings.TrimRight(string(src), "\n"), "\n") {
				f := strings.Fields(line)
				if len(f) == 0 || strings.HasPrefix(f[0], "#") {
					out.WriteString(line + "\n")
					continue
				}
				res := d.step(f)
				if res == "" {
					fmt.Fprintf(&out, "%s\n", line)
				} else {
					fmt.Fprintf(&out, "%s\n  -> %s\n", line, res)
				}
			}
			golden := strings.TrimSuffix(script, ".script") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(out.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if out.String() != string(want) {
				t.Errorf("transcript differs from %s:\n%s", golden, out.String())
			}
		})
	}
}
