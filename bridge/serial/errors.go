package serial

import "errors"

// Errors of the bridge. They are wrapped with the port's name and path.
var (
	// ErrInvalidConfig is wrapped by every error of Config.Validate.
	ErrInvalidConfig = errors.New("invalid serial config")
	// ErrPortInUse means another Port of this process has the path open or
	// configured.
	ErrPortInUse = errors.New("serial port already in use in this process")
	// ErrPortLocked means another process holds the flock on the device node.
	ErrPortLocked = errors.New("serial port locked by another process")
	// ErrFDLimit means the port's file descriptors are too high for the
	// library's select(2) (>= 1024); it is closed instead of read.
	ErrFDLimit = errors.New("serial port fd beyond the select(2) limit")
	// ErrStarted is returned by a second Start.
	ErrStarted = errors.New("serial port already started")
	// ErrStopTimeout means Stop returned with appends still outstanding.
	ErrStopTimeout = errors.New("serial port stop timed out")
)
