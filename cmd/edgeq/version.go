package main

import (
	"fmt"
	"io"
	"runtime"
)

// Stamped by the Makefile with -ldflags -X.
var (
	version   = "dev"
	commit    = "unknown"
	buildDate = "unknown"
)

func runVersion(_ []string, stdout, _ io.Writer) int {
	fmt.Fprintf(stdout, "edgeq %s (commit %s, built %s, %s, %s/%s)\n",
		version, commit, buildDate, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return 0
}
