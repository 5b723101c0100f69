// Package devicemetrics reads on-device metrics of an edgeq gateway from
// procfs and sysfs: CPU seconds and load, memory, this process's RSS, CPU
// time and file descriptors, temperatures per thermal zone, disk I/O and free
// space of the data directory, network bytes and errors per interface, and
// uptime.
//
// It only reads and returns samples; exposing them (HTTP, text format) is the
// caller's job. Each reader is a Collector, one per file; CollectAll runs them
// and turns a failing or panicking collector into
// edgeq_collector_success{collector="..."} 0 instead of a failed scrape.
//
// Output is bounded: every collector emits a fixed number of samples or at
// most a configured number of interfaces / thermal zones.
//
// Containers: unless LXCFS is used, /proc/meminfo, /proc/loadavg, /proc/stat,
// /proc/uptime and /proc/diskstats show the HOST's values, while
// /proc/net/dev shows the container's network namespace. Memory limits of a
// container are in cgroup files (e.g. /sys/fs/cgroup/memory.max), which this
// package does not read. A data directory on overlayfs, tmpfs or a btrfs
// subvolume has no block device of its own, so the disk collector reports
// failure there (ErrNoBlockDevice).
package devicemetrics
