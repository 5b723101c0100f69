package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestUplinkNATSUserCannotRead: the uplink's upstream user may publish to
// the stream's subjects and nothing else (no $JS.API), so it cannot look a
// record up in the stream before sending it again. Records that failed
// while the stream did not exist yet are sent again anyway (counted as
// unverified, the duplicate window their only dedup): the uplink does not
// stall, and the stream holds every record once, in order.
func TestUplinkNATSUserCannotRead(t *testing.T) {
	js := newJSServer(t)
	conf := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(conf, []byte(`authorization {
  users = [
    {user: admin, password: adminpass}
    {user: up, password: uppass, permissions: {publish: {allow: ["plant3.>"]}, subscribe: {allow: ["_INBOX.>"]}}}
  ]
}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	js.extra = []string{"-c", conf}
	js.connect = []nats.Option{nats.UserInfo("admin", "adminpass")}
	js.start()
	yaml := strings.Replace(uplinkYAML(js.url()), "      subject: plant3.{device}\n", "      subject: plant3.{device}\n      user: up\n      password: uppass\n", 1)
	n := newNode(t, yaml)
	n.start()
	pub := newPublisher(t, n.url(), 100)
	const devices, rounds = 10, 20
	for i := 1; i <= rounds; i++ {
		for d := 0; d < devices; d++ {
			dev := fmt.Sprintf("perm-%02d", d)
			pub.publish(dev, fmt.Sprintf("%s|%d", dev, i))
		}
	}
	waitFor(t, "all acked", 60*time.Second, func() bool { return pub.acked() == devices*rounds })
	// No stream yet: the publishes fail, so the records go again later.
	waitFor(t, "records retried", 30*time.Second, func() bool {
		u, ok := uplinkStatus(t, n)
		return ok && u.Retried >= devices
	})
	js.createStream()
	waitFor(t, "the backlog upstream", 60*time.Second, func() bool { return js.streamMsgs() >= devices*rounds })
	msgs := js.readStream(t)
	if dupes := checkUpstream(t, pub.ackedPayloads(), msgs); dupes > 0 {
		t.Errorf("%d duplicates upstream", dupes)
	}
	st := uplinkStatusFull(t, n)
	if st.Unverified == 0 {
		t.Errorf("status %+v: want records sent again unverified", st)
	}
	t.Logf("%d in the stream; %d checks, %d unverified", len(msgs), st.UpstreamChecks, st.Unverified)
}
