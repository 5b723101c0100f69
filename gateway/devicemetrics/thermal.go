package devicemetrics

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// thermalCollector reports the temperature of each thermal zone under
// <sys>/class/thermal, in Celsius, labelled by zone number and type.
//
// A zone whose temp file is missing, unreadable (EINVAL, ENODATA, EAGAIN
// from a sleeping sensor) or invalid is ABSENT from the output, never 0 °C
// (GOTCHAS 5), and is counted in edgeq_device_thermal_zones_omitted.
//
// Why not procfs's sysfs.FS.ClassThermalZoneStats (v0.23.0, checked on the
// fixtures): it opens files with a blocking os.Open, so a temp that is a
// FIFO hangs the scrape for good; it joins every file's error of a zone into
// one ReadErrors, with Temp 0 beside it, and needs a policy file, so the one
// error that matters (temp) can only be told from a missing policy by its
// text; it means to drop EINVAL from temp with no error at all (errors.Is
// os.ErrInvalid, which a syscall.EINVAL does not match today); and it reads
// five files of every zone before the zone limit applies.
// A machine with no thermal zones (VMs, containers) reports none and succeeds.
type thermalCollector struct {
	sysRoot  string
	maxZones int
}

var _ Collector = thermalCollector{}

func (thermalCollector) Name() string { return "thermal" }

const (
	temperatureName = "edgeq_device_temperature_celsius"
	temperatureHelp = "Temperature of a thermal zone in degrees Celsius; a zone that cannot be read is absent, never 0."
	zonesOmitName   = "edgeq_device_thermal_zones_omitted"
	zonesOmitHelp   = "Thermal zones left out of edgeq_device_temperature_celsius, by reason (unreadable, limit)."
)

func (c thermalCollector) Collect(dst []Sample) ([]Sample, error) {
	// A missing sysfs root is a misconfiguration; a missing class/thermal
	// below it only means there are no zones.
	if _, err := os.Stat(c.sysRoot); err != nil {
		return dst, fmt.Errorf("open sysfs at %s: %w", c.sysRoot, err)
	}
	dir := filepath.Join(c.sysRoot, "class", "thermal")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		entries, err = nil, nil // no thermal zones on this machine
	}
	if err != nil {
		return dst, fmt.Errorf("list thermal zones: %w", err)
	}
	zones := make([]int, 0, len(entries))
	for _, e := range entries {
		if n, ok := thermalZoneNumber(e.Name()); ok {
			zones = append(zones, n)
		}
	}
	// Numeric order, so thermal_zone10 follows thermal_zone9 and the limit
	// keeps the lowest-numbered zones (the SoC's zone is thermal_zone0).
	slices.Sort(zones)
	overLimit := 0
	if len(zones) > c.maxZones {
		overLimit = len(zones) - c.maxZones
		zones = zones[:c.maxZones]
	}
	unreadable := 0
	for _, n := range zones {
		zone := strconv.Itoa(n)
		zoneDir := filepath.Join(dir, "thermal_zone"+zone)
		celsius, err := readZoneTemperature(zoneDir)
		if err != nil {
			unreadable++
			continue
		}
		dst = append(dst, gauge(temperatureName, temperatureHelp, celsius,
			Label{"zone", zone}, Label{"type", readZoneType(zoneDir)}))
	}
	return append(dst,
		gauge(zonesOmitName, zonesOmitHelp, float64(unreadable), Label{"reason", "unreadable"}),
		gauge(zonesOmitName, zonesOmitHelp, float64(overLimit), Label{"reason", "limit"}),
	), nil
}

func readZoneTemperature(zoneDir string) (float64, error) {
	text, err := readSmallFile(filepath.Join(zoneDir, "temp"))
	if err != nil {
		return 0, err
	}
	celsius, err := parseMilliCelsius(text)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", filepath.Join(zoneDir, "temp"), err)
	}
	return celsius, nil
}

// readZoneType returns the zone's type ("cpu-thermal" on a Pi), or "" when it
// cannot be read: the temperature is still valid without it.
func readZoneType(zoneDir string) string {
	text, err := readSmallFile(filepath.Join(zoneDir, "type"))
	if err != nil {
		return ""
	}
	return strings.ToValidUTF8(text, string(utf8.RuneError))
}

// thermalZoneNumber returns n for a directory entry named thermal_zone<n>.
func thermalZoneNumber(name string) (int, bool) {
	digits, ok := strings.CutPrefix(name, "thermal_zone")
	if !ok || digits == "" {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	// The round trip rejects signs, leading zeros and overflow: names the
	// kernel does not make, and the zone path is rebuilt from n.
	if err != nil || n < 0 || strconv.Itoa(n) != digits {
		return 0, false
	}
	return n, true
}

var errInvalidTemperature = errors.New("invalid temperature")

// minValidMilliCelsius is absolute zero. The kernel's THERMAL_TEMP_INVALID
// (-274000) is below it, and some drivers report it for a sensor without a
// reading; anything that cold is treated as no reading.
const minValidMilliCelsius = -273150

// parseMilliCelsius parses a thermal zone's temp file (signed millidegrees
// Celsius) into degrees Celsius.
func parseMilliCelsius(text string) (float64, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return 0, fmt.Errorf("%w: empty", errInvalidTemperature)
	}
	milli, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", errInvalidTemperature, err)
	}
	if milli < minValidMilliCelsius {
		return 0, fmt.Errorf("%w: %d m°C is below absolute zero", errInvalidTemperature, milli)
	}
	return float64(milli) / 1000, nil
}
