package hot

import (
	"testing"
	"time"
)

func TestLookup(t *testing.T) {
	d, err := New(Config{Window: time.Second, Factor: 2, MinRate: 5, MaxDevices: 10, MaxHot: 4})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1000, 0)
	d.Observe("calm", 0, t0)
	for i := 0; i < 100; i++ {
		d.Observe("loud", 0, t0.Add(time.Duration(i)*time.Millisecond))
	}
	d.Evaluate(t0.Add(999 * time.Millisecond))
	for _, tt := range []struct {
		device string
		ok     bool
		rate   float64
	}{{"loud", true, 100}, {"calm", true, 1}, {"nobody", false, 0}} {
		got, ok := d.Lookup(tt.device)
		if ok != tt.ok || got.Rate != tt.rate {
			t.Errorf("Lookup(%s) = %+v, %v; want rate %v, %v", tt.device, got, ok, tt.rate, tt.ok)
		}
	}
	if r, _ := d.Lookup("loud"); r != d.Top(1)[0] {
		t.Errorf("Lookup and Top disagree: %+v vs %+v", r, d.Top(1)[0])
	}
}
