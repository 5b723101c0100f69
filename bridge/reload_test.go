package bridge

import (
	"reflect"
	"testing"
)

func TestDiffByName(t *testing.T) {
	type c struct{ name, v string }
	name := func(x c) string { return x.name }
	for _, tc := range []struct {
		what        string
		old, cur    []c
		stop, start []int
	}{
		{"unchanged", []c{{"a", "1"}, {"b", "1"}}, []c{{"b", "1"}, {"a", "1"}}, nil, nil},
		{"changed", []c{{"a", "1"}, {"b", "1"}}, []c{{"a", "1"}, {"b", "2"}}, []int{1}, []int{1}},
		{"added", []c{{"a", "1"}}, []c{{"a", "1"}, {"n", "1"}}, nil, []int{1}},
		{"removed", []c{{"a", "1"}, {"b", "1"}}, []c{{"b", "1"}}, []int{0}, nil},
		{"renamed", []c{{"a", "1"}}, []c{{"z", "1"}}, []int{0}, []int{0}},
	} {
		stop, start := DiffByName(tc.old, tc.cur, name)
		if !reflect.DeepEqual(stop, tc.stop) || !reflect.DeepEqual(start, tc.start) {
			t.Errorf("%s: stop %v start %v, want %v %v", tc.what, stop, start, tc.stop, tc.start)
		}
	}
}
