package serial

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestListPortsFixture(t *testing.T) {
	ports, err := ListPorts("testdata/sys", "testdata/dev")
	if err != nil {
		t.Fatal(err)
	}
	byID := "testdata/dev/serial/by-id/"
	want := []PortInfo{
		{Name: "ttyACM0", Path: "testdata/dev/ttyACM0", Driver: "cdc_acm", VID: "2341", PID: "0043",
			SerialNumber: "7593231373535121E0A1", Manufacturer: "Arduino (www.arduino.cc)", Product: "Arduino Uno", Interface: "00",
			ByID: []string{byID + "usb-Arduino__www.arduino.cc__Arduino_Uno_7593231373535121E0A1-if00"}},
		{Name: "ttyAMA0", Path: "testdata/dev/ttyAMA0", Driver: "uart-pl011"},
		{Name: "ttyUSB0", Path: "testdata/dev/ttyUSB0", Driver: "ftdi_sio", VID: "0403", PID: "6001",
			SerialNumber: "A10K4ZQX", Manufacturer: "FTDI", Product: "FT232R USB UART", Interface: "00",
			ByID: []string{byID + "usb-FTDI_FT232R_USB_UART_A10K4ZQX-if00-port0"}},
		{Name: "ttyUSB10", Path: "testdata/dev/ttyUSB10", Driver: "ch341-uart", VID: "1a86", PID: "7523",
			Manufacturer: "?[31mQinHeng?Electronics", Product: "USB Serial", Interface: "00",
			ByID: []string{byID + "usb-1a86_USB_Serial-if00-port0"}},
	}
	if len(ports) != len(want) {
		t.Fatalf("ListPorts found %d ports, want %d (ttyS1 placeholder and tty1 excluded): %+v", len(ports), len(want), ports)
	}
	for i := range want {
		if !equalPortInfo(ports[i], want[i]) {
			t.Errorf("port %d:\n got %+v\nwant %+v", i, ports[i], want[i])
		}
	}

	var out bytes.Buffer
	if err := FormatPorts(&out, ports); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "list.golden")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wantOut, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), wantOut) {
		t.Fatalf("FormatPorts:\n%s\nwant (testdata/list.golden, -update to rewrite):\n%s", out.Bytes(), wantOut)
	}
}

func equalPortInfo(a, b PortInfo) bool {
	return slices.Equal(a.ByID, b.ByID) && a.Name == b.Name && a.Path == b.Path && a.Driver == b.Driver &&
		a.VID == b.VID && a.PID == b.PID && a.SerialNumber == b.SerialNumber &&
		a.Manufacturer == b.Manufacturer && a.Product == b.Product && a.Interface == b.Interface
}

func TestListPortsMissingRoots(t *testing.T) {
	if _, err := ListPorts(filepath.Join(t.TempDir(), "nosys"), "/dev"); err == nil {
		t.Fatal("ListPorts on a missing sysfs: nil error")
	}
	// No /dev/serial/by-id (no USB adapter): ports are still listed.
	ports, err := ListPorts("testdata/sys", t.TempDir())
	if err != nil || len(ports) != 4 || len(ports[0].ByID) != 0 {
		t.Fatalf("ListPorts without by-id: %d ports, %v", len(ports), err)
	}
	var out bytes.Buffer
	if err := FormatPorts(&out, nil); err != nil || out.String() != "no serial ports found\n" {
		t.Fatalf("FormatPorts(nil) = %q, %v", out.String(), err)
	}
}

func TestCompareNatural(t *testing.T) {
	names := []string{"ttyUSB10", "ttyACM0", "ttyUSB2", "ttyS0", "ttyUSB0", "ttyAMA0", "tty"}
	slices.SortFunc(names, compareNatural)
	want := []string{"tty", "ttyACM0", "ttyAMA0", "ttyS0", "ttyUSB0", "ttyUSB2", "ttyUSB10"}
	if !slices.Equal(names, want) {
		t.Fatalf("sorted %v, want %v", names, want)
	}
}
