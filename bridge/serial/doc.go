// Package serial is edgeq's serial-port ingest bridge (go.bug.st/serial).
//
// A Port reads one serial line, cuts it into newline-delimited frames, turns
// each frame into a record (formats json, line and raw) and appends it to the
// node's log. It survives unplug and replug: any read error closes the port,
// backs off, waits for the path to come back and reopens it.
//
// Contract:
//   - Frames of one port are appended in the order they were read; a frame is
//     counted exactly once: as stored, as a storage error, or as dropped with
//     a reason (oversize, non_utf8, malformed, bad_device, incomplete,
//     shutdown). A serial line has no acknowledgements, so a frame that fails
//     to store is lost: it is counted and logged.
//   - The first frame after an open may be the tail of a line the sensor
//     was sending: it is usually dropped as malformed, and counted.
//   - At most Config.MaxPending appends are outstanding; beyond that the
//     reader waits (the kernel's tty buffer, and on USB and pty lines their
//     flow control, absorb the pause) rather than dropping frames.
//   - A device path is opened by one Port in the process (registry keyed by
//     the resolved path) and by one edgeq process on the machine (flock on the
//     device node), because TIOCEXCL does not stop root (GOTCHAS 3).
//   - go.bug.st/serial panics in Read when a port's fds are >= 1024
//     (select(2) with a fixed FdSet). Ports are opened into reserved low fd
//     numbers and refused when their fds are out of range (fdguard.go).
//   - ListPorts reads sysfs only: it never opens a port (the library's
//     enumerator opens and reconfigures every ttyS).
package serial
