package bridge

import (
	"reflect"
	"slices"
)

// What a reload does to one kind of bridge (MQTT bridges, serial ports,
// Modbus buses, uplinks), each a list of configs named by their name:
// DiffByName says which running ones stop and which wanted ones start,
// Restart makes the new list. Unchanged ones run on untouched.

// DiffByName returns, for lists of configs named by name, the indexes of
// old ones that are gone or changed (to stop) and of new ones that are new
// or changed (to start). Unchanged ones keep running untouched.
func DiffByName[T any](old, cur []T, name func(T) string) (stop, start []int) {
	byName := map[string]int{}
	for i, c := range cur {
		byName[name(c)] = i
	}
	kept := map[string]bool{}
	for i, o := range old {
		j, ok := byName[name(o)]
		if ok && reflect.DeepEqual(o, cur[j]) {
			kept[name(o)] = true
			continue
		}
		stop = append(stop, i)
	}
	for j, c := range cur {
		if !kept[name(c)] {
			start = append(start, j)
		}
	}
	return stop, start
}

// Restart is one kind's bridges after a reload: the running ones not in
// stop (their configs from cur) and, opened by open, want's entries in
// start. An entry that fails to open is reported and left out.
func Restart[B, C any](running []B, cur, want []C, stop, start []int, open func(C) (B, error)) (bs []B, cs []C, errs []error) {
	for i := range running {
		if !slices.Contains(stop, i) {
			bs, cs = append(bs, running[i]), append(cs, cur[i])
		}
	}
	for _, j := range start {
		b, err := open(want[j])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		bs, cs = append(bs, b), append(cs, want[j])
	}
	return bs, cs, errs
}
