package metrics

import "testing"

func TestCPUPercent(t *testing.T) {
	reading := func(busy, total float64) DeviceHealth {
		return DeviceHealth{CPUBusySeconds: &busy, CPUTotalSeconds: &total}
	}
	tests := []struct {
		name      string
		prev, cur DeviceHealth
		want      float64
		ok        bool
	}{
		{"quarter busy", reading(100, 1000), reading(110, 1040), 25, true},
		{"idle", reading(100, 1000), reading(100, 1008), 0, true},
		{"no time passed", reading(100, 1000), reading(100, 1000), 0, false},
		{"counter reset (reboot)", reading(500, 9000), reading(10, 100), 0, false},
		{"first reading", DeviceHealth{}, reading(10, 100), 0, false},
		{"collector failed", reading(10, 100), DeviceHealth{}, 0, false},
	}
	for _, tt := range tests {
		got, ok := CPUPercent(tt.prev, tt.cur)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: %v %v, want %v %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

func TestCPUTemperature(t *testing.T) {
	tests := []struct {
		name  string
		zones []Temperature
		want  string
	}{
		{"pi", []Temperature{{"0", "cpu-thermal", 50}, {"1", "gpu", 70}}, "cpu-thermal"},
		{"x86", []Temperature{{"0", "acpitz", 30}, {"1", "x86_pkg_temp", 60}}, "x86_pkg_temp"},
		{"unknown types: hottest", []Temperature{{"0", "a", 30}, {"1", "b", 60}, {"2", "c", 40}}, "b"},
	}
	for _, tt := range tests {
		got, ok := DeviceHealth{Temperatures: tt.zones}.CPUTemperature()
		if !ok || got.Type != tt.want {
			t.Errorf("%s: %+v %v, want %s", tt.name, got, ok, tt.want)
		}
	}
}
