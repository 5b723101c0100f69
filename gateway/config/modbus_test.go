package config

import (
	"strings"
	"testing"
	"time"

	"edgeq/bridge/modbus"
)

const modbusYAML = `
modbus:
  - name: plant
    rtu: {path: /dev/serial/by-id/usb-FTDI-if00, baud: 19200, parity: none, stop_bits: 2}
    timeout: 250ms
    devices:
      - unit: 3
        device: meter-3
        interval: 2s
        on_change: true
        registers:
          - {name: voltage, function: holding, address: 0, type: uint16, scale: 0.1, unit: V, deadband: 0.5}
          - {name: energy, function: input, address: 10, type: float32, word_order: little, interval: 1m}
          - {name: running, function: coils, address: 0}
  - name: plc
    tcp: {address: 127.0.0.1:502}
    retries: 0
    devices:
      - {unit: 0, device: plc-0, registers: [{name: s, function: holding, address: 0, type: string, count: 8}]}
`

func TestModbusConfig(t *testing.T) {
	cfg, err := Load(writeFile(t, modbusYAML), nil, Flags{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Modbus) != 2 {
		t.Fatalf("%d buses", len(cfg.Modbus))
	}
	rtu := modbus.Config(cfg.Modbus[0]).WithDefaults()
	if rtu.RTU.Baud != 19200 || rtu.RTU.StopBits != 2 || rtu.RTU.DataBits != 8 || rtu.Timeout != 250*time.Millisecond || rtu.Retries != 2 {
		t.Errorf("rtu bus %+v %+v", rtu, rtu.RTU)
	}
	r := rtu.Devices[0].Registers
	if r[0].Scale != 0.1 || r[1].WordOrder != modbus.Little || r[1].Interval != time.Minute || r[0].Interval != 2*time.Second || r[2].Type != modbus.Bool {
		t.Errorf("registers %+v", r)
	}
	if tcp := modbus.Config(cfg.Modbus[1]); tcp.Retries != 0 || tcp.TCP.Address != "127.0.0.1:502" {
		t.Errorf("tcp bus %+v", tcp)
	}
}

func TestModbusConfigRejectsWithKeyNames(t *testing.T) {
	cases := []struct{ name, from, to, want string }{
		{"overlap", "{name: running, function: coils, address: 0}",
			"{name: running, function: coils, address: 0}\n          - {name: dup, function: input, address: 11, type: uint16}",
			"modbus[plant].devices[0].registers[3].address: input 11 overlaps registers[1]"},
		{"unknown key", "word_order: little", "word_ordr: little", "modbus[0].devices[0].registers[1].word_ordr: unknown key"},
		{"count", "count: 8", "count: 200", "modbus[plc].devices[0].registers[0].count: 200 registers in one read, at most 125"},
		{"type", "type: uint16, scale", "type: uint17, scale", `modbus[plant].devices[0].registers[0].type: "uint17"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(writeFile(t, strings.Replace(modbusYAML, c.from, c.to, 1)), nil, Flags{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
		})
	}
}
