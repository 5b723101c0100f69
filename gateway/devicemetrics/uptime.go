package devicemetrics

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
)

// uptimeCollector reports seconds since boot from <proc>/uptime, which
// procfs does not parse. In a container it is the host's uptime.
type uptimeCollector struct {
	procRoot string
}

var _ Collector = uptimeCollector{}

func (uptimeCollector) Name() string { return "uptime" }

func (c uptimeCollector) Collect(dst []Sample) ([]Sample, error) {
	text, err := readSmallFile(filepath.Join(c.procRoot, "uptime"))
	if err != nil {
		return dst, err
	}
	seconds, err := parseUptime(text)
	if err != nil {
		return dst, fmt.Errorf("parse %s: %w", filepath.Join(c.procRoot, "uptime"), err)
	}
	return append(dst, gauge("edgeq_device_uptime_seconds",
		"Seconds since the kernel booted, including time suspended.", seconds)), nil
}

var errMalformedUptime = errors.New("malformed uptime")

// parseUptime parses /proc/uptime, "<uptime> <idle>" in seconds with two
// decimals, and returns the first field.
func parseUptime(text string) (float64, error) {
	fields := strings.Fields(text)
	if len(fields) != 2 {
		return 0, fmt.Errorf("%w: want 2 fields, got %q", errMalformedUptime, text)
	}
	seconds, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", errMalformedUptime, err)
	}
	if seconds < 0 || math.IsNaN(seconds) || math.IsInf(seconds, 0) {
		return 0, fmt.Errorf("%w: uptime %q is not a non-negative number", errMalformedUptime, fields[0])
	}
	return seconds, nil
}
