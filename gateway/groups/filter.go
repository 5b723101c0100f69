package groups

import (
	"fmt"
	"strings"

	"edgeq/gateway/subject"
)

// deviceMatcher decides whether a telemetry subject "<prefix>.<device>"
// matches a subscription filter, from the device alone: no subject is built
// per message. Device IDs contain no '.', so such subjects have two tokens.
type deviceMatcher struct {
	all    bool
	device string // exact device when !all
	none   bool
}

func newDeviceMatcher(filter, prefix string) (deviceMatcher, error) {
	if err := subject.CheckFilter(filter); err != nil {
		return deviceMatcher{}, fmt.Errorf("groups: filter %q: %w", filter, err)
	}
	tok := strings.Split(filter, ".")
	switch {
	case tok[0] == ">":
		return deviceMatcher{all: true}, nil
	case tok[0] != "*" && tok[0] != prefix:
		return deviceMatcher{none: true}, nil
	case len(tok) < 2:
		return deviceMatcher{none: true}, nil
	case tok[1] == ">" || (tok[1] == "*" && len(tok) == 2):
		return deviceMatcher{all: true}, nil
	case len(tok) == 2:
		return deviceMatcher{device: tok[1]}, nil
	}
	return deviceMatcher{none: true}, nil
}

func (m deviceMatcher) match(device string) bool {
	return !m.none && (m.all || m.device == device)
}

// IsTelemetryFilter reports whether filter can match telemetry subjects of
// prefix: such subscriptions are served from the log (queue groups, live tail).
func IsTelemetryFilter(filter, prefix string) bool {
	m, err := newDeviceMatcher(filter, prefix)
	return err == nil && !m.none
}
