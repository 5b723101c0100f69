package queue

import "fmt"

// Names as they appear in configuration files; Parse* accept them.

func (o Ordering) String() string {
	switch o {
	case OrderPerDevice:
		return "per_device"
	case OrderNone:
		return "none"
	}
	return fmt.Sprintf("ordering(%d)", uint8(o))
}

func (s Strategy) String() string {
	switch s {
	case StrategyRandom:
		return "random"
	case StrategySticky:
		return "sticky"
	}
	return fmt.Sprintf("strategy(%d)", uint8(s))
}

func (d DeliverPolicy) String() string {
	switch d {
	case DeliverNew:
		return "new"
	case DeliverAll:
		return "all"
	}
	return fmt.Sprintf("deliver(%d)", uint8(d))
}

// ParseOrdering accepts "per_device" and "none".
func ParseOrdering(s string) (Ordering, error) {
	for o := OrderPerDevice; o <= OrderNone; o++ {
		if o.String() == s {
			return o, nil
		}
	}
	return 0, fmt.Errorf("queue: %w: unknown ordering %q (want per_device or none)", ErrInvalidConfig, s)
}

// ParseStrategy accepts "random" and "sticky".
func ParseStrategy(s string) (Strategy, error) {
	for v := StrategyRandom; v <= StrategySticky; v++ {
		if v.String() == s {
			return v, nil
		}
	}
	return 0, fmt.Errorf("queue: %w: unknown strategy %q (want random or sticky)", ErrInvalidConfig, s)
}

// ParseDeliverPolicy accepts "new" and "all".
func ParseDeliverPolicy(s string) (DeliverPolicy, error) {
	for v := DeliverNew; v <= DeliverAll; v++ {
		if v.String() == s {
			return v, nil
		}
	}
	return 0, fmt.Errorf("queue: %w: unknown deliver policy %q (want new or all)", ErrInvalidConfig, s)
}
