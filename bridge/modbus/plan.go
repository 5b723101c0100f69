package modbus

import "slices"

// read is one planned request and the registers it answers.
type read struct {
	fn   Function
	addr int
	qty  int
	regs []int // indexes into the device's registers, by address
}

// plan merges the reads of the given registers into as few requests as the
// spec allows: one table per request, at most maxRegs registers (2000
// bits), and across at most maxGap unmapped registers (or bits) between
// two mapped ones. It is pure; due lists indexes into regs.
func plan(regs []Register, due []int, maxRegs, maxGap int) []read {
	idx := slices.Clone(due)
	slices.SortFunc(idx, func(a, b int) int {
		ra, rb := regs[a], regs[b]
		if ra.Function != rb.Function {
			return int(ra.Function.code()) - int(rb.Function.code())
		}
		return ra.Address - rb.Address
	})
	var out []read
	for _, i := range idx {
		r := regs[i]
		limit := min(maxRegs, MaxReadRegisters)
		gap := maxGap
		if r.Function.bits() {
			limit, gap = MaxReadBits, maxGap*16
		}
		end := r.Address + r.size() // exclusive
		if n := len(out); n > 0 {
			last := &out[n-1]
			lastEnd := last.addr + last.qty
			if last.fn == r.Function && r.Address >= lastEnd && r.Address-lastEnd <= gap && end-last.addr <= limit {
				last.qty = end - last.addr
				last.regs = append(last.regs, i)
				continue
			}
		}
		out = append(out, read{fn: r.Function, addr: r.Address, qty: r.size(), regs: []int{i}})
	}
	return out
}
