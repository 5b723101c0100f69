package serial

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Bounds of ListPorts, so a strange sysfs cannot make it unbounded.
const (
	maxListed     = 4096 // tty entries and by-id links read
	maxAttrBytes  = 256  // one sysfs attribute
	maxAttrString = 128  // what is kept of it
	maxWalkUp     = 16   // directories climbed looking for the USB device
)

// PortInfo describes one serial port as sysfs and /dev show it. The USB
// fields are empty for on-board UARTs.
type PortInfo struct {
	Name         string   `json:"name"`             // kernel name: ttyUSB0
	Path         string   `json:"path"`             // device node: /dev/ttyUSB0
	ByID         []string `json:"by_id,omitempty"`  // /dev/serial/by-id links to it
	Driver       string   `json:"driver,omitempty"` // ftdi_sio, cdc_acm, pl011, serial8250
	VID          string   `json:"vid,omitempty"`    // USB vendor ID, 4 hex digits
	PID          string   `json:"pid,omitempty"`    // USB product ID
	SerialNumber string   `json:"serial_number,omitempty"`
	Manufacturer string   `json:"manufacturer,omitempty"`
	Product      string   `json:"product,omitempty"`
	Interface    string   `json:"interface,omitempty"` // USB interface number
}

// ListPorts lists the serial ports under sysRoot (normally /sys) and their
// links under devRoot (normally /dev). It reads sysfs and readlinks only:
// no port is opened (go.bug.st/serial's enumerator opens every ttyS and
// sets it to 9600 8N1, which can reconfigure a Pi's console UART). A tty
// without a device (virtual consoles, ptys) is not a serial port; a UART
// whose type is 0 (PORT_UNKNOWN) is a placeholder without hardware.
func ListPorts(sysRoot, devRoot string) ([]PortInfo, error) {
	classDir := filepath.Join(sysRoot, "class", "tty")
	entries, err := readDirLimited(classDir, maxListed)
	if err != nil {
		return nil, fmt.Errorf("list serial ports: %w", err)
	}
	links := byIDLinks(devRoot)
	var ports []PortInfo
	for _, name := range entries {
		info, ok := portInfo(filepath.Join(classDir, name), name, devRoot)
		if !ok {
			continue
		}
		info.ByID = links[info.Path]
		ports = append(ports, info)
	}
	slices.SortFunc(ports, func(a, b PortInfo) int { return compareNatural(a.Name, b.Name) })
	return ports, nil
}

// portInfo reads one /sys/class/tty entry; ok is false when it is no serial port.
func portInfo(ttyDir, name, devRoot string) (PortInfo, bool) {
	devDir, err := filepath.EvalSymlinks(filepath.Join(ttyDir, "device"))
	if err != nil {
		return PortInfo{}, false
	}
	if t, err := readAttr(filepath.Join(ttyDir, "type")); err == nil && t == "0" {
		return PortInfo{}, false
	}
	info := PortInfo{Name: name, Path: filepath.Join(devRoot, name)}
	if drv, err := filepath.EvalSymlinks(filepath.Join(devDir, "driver")); err == nil {
		info.Driver = filepath.Base(drv)
	}
	dir := devDir
	for range maxWalkUp {
		if info.Interface == "" {
			info.Interface, _ = readAttr(filepath.Join(dir, "bInterfaceNumber"))
		}
		vid, errV := readAttr(filepath.Join(dir, "idVendor"))
		pid, errP := readAttr(filepath.Join(dir, "idProduct"))
		if errV == nil && errP == nil {
			info.VID, info.PID = vid, pid
			info.SerialNumber, _ = readAttr(filepath.Join(dir, "serial"))
			info.Manufacturer, _ = readAttr(filepath.Join(dir, "manufacturer"))
			info.Product, _ = readAttr(filepath.Join(dir, "product"))
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir || filepath.Base(parent) == "devices" {
			break
		}
		dir = parent
	}
	return info, true
}

// byIDLinks maps each device node to the devRoot/serial/by-id links that
// point at it. A missing by-id directory (no USB serial adapter) is empty.
func byIDLinks(devRoot string) map[string][]string {
	dir := filepath.Join(devRoot, "serial", "by-id")
	names, err := readDirLimited(dir, maxListed)
	if err != nil {
		return nil
	}
	links := make(map[string][]string)
	for _, n := range names {
		link := filepath.Join(dir, n)
		target, err := os.Readlink(link)
		if err != nil {
			continue
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(dir, target)
		}
		target = filepath.Clean(target)
		links[target] = append(links[target], link)
	}
	return links
}

// readDirLimited returns at most limit sorted names of dir.
func readDirLimited(dir string, limit int) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(limit)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}

// readAttr reads a small sysfs attribute, trimmed and made printable.
func readAttr(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	buf := make([]byte, maxAttrBytes)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", err
	}
	if n == 0 && errors.Is(err, io.EOF) {
		return "", fs.ErrNotExist
	}
	return printable(strings.TrimSpace(string(buf[:n])), maxAttrString), nil
}

// printable replaces control and invalid bytes, so sysfs strings (written by
// the USB device itself) cannot garble a terminal, and caps the length.
func printable(s string, limit int) string {
	s = strings.ToValidUTF8(s, "?")
	s = strings.Map(func(r rune) rune {
		if isControl(r) {
			return '?'
		}
		return r
	}, s)
	if len(s) > limit {
		s = strings.ToValidUTF8(s[:limit], "")
	}
	return s
}

// compareNatural orders ttyUSB2 before ttyUSB10.
func compareNatural(a, b string) int {
	pa, na := splitTrailingNumber(a)
	pb, nb := splitTrailingNumber(b)
	if c := strings.Compare(pa, pb); c != 0 {
		return c
	}
	if na != nb {
		if na < nb {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

func splitTrailingNumber(s string) (string, int) {
	i := len(s)
	for i > 0 && isDigit(s[i-1]) {
		i--
	}
	n, err := strconv.Atoi(s[i:])
	if err != nil {
		return s, -1
	}
	return s[:i], n
}
