package queue

import (
	"fmt"
	"time"
)

// Ordering says how many messages of one device may be in flight at once.
type Ordering uint8

const (
	// OrderPerDevice (default, "per_device") keeps at most one message per
	// device in flight: a device's next message goes out only after the
	// previous one is acked, terminated or dead-lettered.
	OrderPerDevice Ordering = iota
	// OrderNone ("none") lifts the per-device limit for raw throughput. Move
	// markers are then ignored, since there is no order to keep.
	OrderNone
)

// Strategy picks a member for a message among members with free credit.
type Strategy uint8

const (
	// StrategyRandom (default, "random") picks uniformly among members with free credit.
	StrategyRandom Strategy = iota
	// StrategySticky ("sticky") sends a device to one member, chosen by
	// rendezvous hashing over the members whose credit is above zero, for as
	// long as that set is unchanged. When a device's member has no free
	// credit the device waits for it rather than moving (moving would break
	// the affinity the group asked for). A member with credit 0 is paused and
	// owns no devices. Redeliveries after ack_wait ignore stickiness (they go
	// to another member where one exists).
	StrategySticky
)

// DeliverPolicy says where a group without a committed offset starts.
type DeliverPolicy uint8

const (
	// DeliverNew (default, "new") starts after the last record stored when the group first reads a partition.
	DeliverNew DeliverPolicy = iota
	// DeliverAll ("all") starts at the first record still stored.
	DeliverAll
)

// DefaultCredit, passed to AddMember, gives the member Config.MaxInFlight.
const DefaultCredit = -1

// MaxReadAheadMsgs caps Config.ReadAheadMsgs: the offset window is a ring of this many slots at most.
const MaxReadAheadMsgs = 1 << 20

// Config of one queue group. Units are messages, bytes and durations. The
// zero value is not valid; start from DefaultConfig.
type Config struct {
	Ordering Ordering      // default OrderPerDevice
	Strategy Strategy      // default StrategyRandom
	Deliver  DeliverPolicy // default DeliverNew
	// MaxInFlight is the credit of a member added with DefaultCredit. Default 256.
	MaxInFlight int
	// AckWait is how long a delivery may stay unacknowledged before it is
	// redelivered, to another member where one exists. in_progress restarts it. Default 30s.
	AckWait time.Duration
	// MaxDeliver is the number of deliveries after which a message that fails
	// again (nak, ack_wait expiry, its member leaving) is dead-lettered. Default 5.
	MaxDeliver int
	// MaxNakDelay caps the delay a nak may ask for, so a message cannot hold
	// its partition's window indefinitely. 0 ignores delays. Default 1h.
	MaxNakDelay time.Duration
	// ReadAheadMsgs bounds, per partition, the span of the offset window:
	// offsets fetched but not yet committed. It is also the bound of every
	// per-device table (a device is tracked only while it has a message in a
	// window). Default 1024, at most MaxReadAheadMsgs.
	ReadAheadMsgs int
	// ReadAheadBytes bounds, per partition, len(Data) of fetched unfinished
	// messages. A fetch always accepts at least one message, so the bound
	// may be exceeded by one message. Default 1 MiB.
	ReadAheadBytes int
	// DeviceShareMsgs and DeviceShareBytes bound, per partition, what one
	// device may hold of the read-ahead window (with OrderPerDevice, where a
	// device's messages go out one at a time). Beyond its share the reader
	// sets the device's records aside and keeps reading the others; they are
	// read again (Fetch.Refetch) when the device's share has room. 0 picks
	// the default: ReadAheadMsgs/8 (at least 4, at most ReadAheadMsgs) and
	// ReadAheadBytes/8. A share of the whole window turns this off.
	DeviceShareMsgs  int
	DeviceShareBytes int
	// MaxAsideDevices bounds, per partition, the devices with records set
	// aside (one offset range each). When it is reached the partition is not
	// read further until one of them is read again. Default 32.
	MaxAsideDevices int
	// MaxMembers bounds the member table. Default 1024.
	MaxMembers int
	// MaxPartitions bounds the partitions one group reads (all nodes). Default 1024.
	MaxPartitions int
	// DeviceWindow bounds, with OrderPerDevice, the records of one device in
	// flight at once (default 1). Above 1 a device's records still go out
	// in order, all to the member that holds the first of them (the next
	// ones wait in that member's queue), up to the window. On any failure
	// of one of them (nak, ack_wait expiry, its member leaving or pausing,
	// its partition pausing) nothing more of the device goes out; once none
	// of it is out, it starts again from its oldest unfinished record. So
	// a member that sends in order on one ordered connection keeps the
	// device's order, and one that hands back what it has not sent after a
	// failure never puts a record ahead of an earlier one. At most
	// MaxDeviceWindow.
	DeviceWindow int
	// Filter, when set, selects the data messages of this group (the subject
	// filter match). Messages it rejects finish at once: they still move the
	// offset window. Move markers are not filtered. nil accepts all.
	Filter func(*Msg) bool
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		Ordering:        OrderPerDevice,
		Strategy:        StrategyRandom,
		Deliver:         DeliverNew,
		MaxInFlight:     256,
		AckWait:         30 * time.Second,
		MaxDeliver:      5,
		MaxNakDelay:     time.Hour,
		ReadAheadMsgs:   1024,
		ReadAheadBytes:  1 << 20,
		MaxAsideDevices: 32,
		MaxMembers:      1024,
		MaxPartitions:   1024,
		DeviceWindow:    1,
	}
}

// MaxDeviceWindow caps Config.DeviceWindow.
const MaxDeviceWindow = 1024

// Validate reports the first field that is out of range.
func (c Config) Validate() error {
	switch {
	case c.Ordering > OrderNone:
		return fmt.Errorf("queue: config: %w: unknown ordering %d", ErrInvalidConfig, c.Ordering)
	case c.Strategy > StrategySticky:
		return fmt.Errorf("queue: config: %w: unknown strategy %d", ErrInvalidConfig, c.Strategy)
	case c.Deliver > DeliverAll:
		return fmt.Errorf("queue: config: %w: unknown deliver policy %d", ErrInvalidConfig, c.Deliver)
	case c.MaxInFlight < 1:
		return fmt.Errorf("queue: config: %w: max_in_flight must be >= 1, got %d", ErrInvalidConfig, c.MaxInFlight)
	case c.AckWait <= 0:
		return fmt.Errorf("queue: config: %w: ack_wait must be > 0, got %v", ErrInvalidConfig, c.AckWait)
	case c.MaxDeliver < 1:
		return fmt.Errorf("queue: config: %w: max_deliver must be >= 1, got %d", ErrInvalidConfig, c.MaxDeliver)
	case c.MaxNakDelay < 0:
		return fmt.Errorf("queue: config: %w: max_nak_delay must be >= 0, got %v", ErrInvalidConfig, c.MaxNakDelay)
	case c.ReadAheadMsgs < 1 || c.ReadAheadMsgs > MaxReadAheadMsgs:
		return fmt.Errorf("queue: config: %w: read_ahead messages must be in [1, %d], got %d", ErrInvalidConfig, MaxReadAheadMsgs, c.ReadAheadMsgs)
	case c.ReadAheadBytes < 1:
		return fmt.Errorf("queue: config: %w: read_ahead bytes must be >= 1, got %d", ErrInvalidConfig, c.ReadAheadBytes)
	case c.DeviceShareMsgs < 0 || c.DeviceShareMsgs > c.ReadAheadMsgs:
		return fmt.Errorf("queue: config: %w: device share must be in [0, read_ahead %d] messages, got %d", ErrInvalidConfig, c.ReadAheadMsgs, c.DeviceShareMsgs)
	case c.DeviceShareBytes < 0:
		return fmt.Errorf("queue: config: %w: device share bytes must be >= 0, got %d", ErrInvalidConfig, c.DeviceShareBytes)
	case c.MaxAsideDevices < 1:
		return fmt.Errorf("queue: config: %w: max_aside_devices must be >= 1, got %d", ErrInvalidConfig, c.MaxAsideDevices)
	case c.MaxMembers < 1:
		return fmt.Errorf("queue: config: %w: max_members must be >= 1, got %d", ErrInvalidConfig, c.MaxMembers)
	case c.DeviceWindow < 0 || c.DeviceWindow > MaxDeviceWindow:
		return fmt.Errorf("queue: config: %w: device_window must be in [1, %d], got %d", ErrInvalidConfig, MaxDeviceWindow, c.DeviceWindow)
	case c.MaxPartitions < 1:
		return fmt.Errorf("queue: config: %w: max_partitions must be >= 1, got %d", ErrInvalidConfig, c.MaxPartitions)
	}
	return nil
}

// deviceWindow returns the effective device window: 0 counts as 1, and
// OrderNone has no per-device limit to widen.
func (c *Config) deviceWindow() int32 {
	if c.DeviceWindow <= 1 || c.Ordering != OrderPerDevice {
		return 1
	}
	return int32(c.DeviceWindow)
}

// deviceShare returns the effective per-device share of a partition's window.
func (c *Config) deviceShare() (msgs, bytes int) {
	msgs, bytes = c.DeviceShareMsgs, c.DeviceShareBytes
	if msgs == 0 {
		msgs = min(max(c.ReadAheadMsgs/8, 4), c.ReadAheadMsgs)
	}
	if bytes == 0 {
		bytes = max(c.ReadAheadBytes/8, 1)
	}
	return msgs, bytes
}

// DeviceShare is the effective per-device share of a partition's window
// (DeviceShareMsgs and DeviceShareBytes with their defaults for 0).
func (c *Config) DeviceShare() (msgs, bytes int) { return c.deviceShare() }
