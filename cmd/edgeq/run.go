package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"edgeq/gateway"
	"edgeq/gateway/config"
)

func runRun(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", os.Getenv(config.EnvConfigFile), "YAML config file (also $EDGEQ_CONFIG)")
	var fl config.Flags
	fs.StringVar(&fl.DataDir, "data", "", "data directory (default ./edgeq-data)")
	fs.StringVar(&fl.NATSListen, "nats", "", "NATS listen address (default 127.0.0.1:4222)")
	fs.StringVar(&fl.HTTPListen, "http", "", "HTTP listen address (default 127.0.0.1:8222)")
	fs.StringVar(&fl.NodeID, "node-id", "", "node ID (default: generated once, kept in the data directory)")
	fs.StringVar(&fl.LogLevel, "log-level", "", "debug, info, warn or error")
	printConfig := fs.Bool("print-config", false, "print the effective configuration (secrets hidden) and exit")
	check := fs.Bool("check", false, "check the configuration as a reload would (keys, TLS files) and exit: 0 if it would be accepted")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "edgeq run: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	cfg, notes, err := config.LoadWithNotes(*path, os.Environ(), fl)
	if err == nil && *check {
		err = gateway.CheckConfig(cfg)
	}
	if err != nil {
		fmt.Fprintf(stderr, "edgeq run: %v\n", err)
		return 2
	}
	if *check {
		fmt.Fprintf(stdout, "edgeq run: configuration %s is valid\n", *path)
		return 0
	}
	if *printConfig {
		for _, n := range notes {
			fmt.Fprintf(stderr, "edgeq run: %s\n", n)
		}
		eff := cfg.Effective()
		out, err := eff.YAML() // secrets print as <hidden>
		if err != nil {
			fmt.Fprintf(stderr, "edgeq run: %v\n", err)
			return 1
		}
		stdout.Write(out)
		return 0
	}
	var level slog.LevelVar
	level.Set(parseLevel(cfg.LogLevel))
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: &level}))
	for _, n := range notes {
		logger.Warn("config: " + n)
	}
	setMemoryLimit(&cfg, logger)
	node, err := gateway.NewNode(cfg, semver(version, commit), logger)
	if err != nil {
		logger.Error("cannot start", "err", err)
		return 1
	}
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	if err := node.Start(); err != nil {
		logger.Error("cannot start", "err", err)
		return 1
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	var s os.Signal
	for s == nil {
		select {
		case s = <-sig:
		case <-hup:
			reload(node, *path, fl, &level, logger)
		}
	}
	logger.Info("signal received: draining (send it again to exit at once)", "signal", s.String())
	go func() {
		<-sig
		logger.Warn("second signal: exiting without drain")
		os.Exit(1)
	}()
	if err := node.Shutdown(cfg.ShutdownTimeout); err != nil {
		logger.Error("shutdown", "err", err)
		return 1
	}
	return 0
}

// setMemoryLimit applies memory_limit as the runtime's soft memory limit,
// unless GOMEMLIMIT is set (the runtime has applied that one).
func setMemoryLimit(cfg *config.Config, logger *slog.Logger) {
	if v, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		logger.Info("memory limit from GOMEMLIMIT", "GOMEMLIMIT", v)
		return
	}
	limit := cfg.GCMemoryLimit()
	debug.SetMemoryLimit(limit)
	logger.Debug("memory limit", "bytes", limit)
}

func parseLevel(level string) slog.Level {
	var l slog.Level
	_ = l.UnmarshalText([]byte(strings.ToUpper(level)))
	return l
}

// reload reads the configuration again (SIGHUP) and applies what can
// change while running; a config that does not load or apply keeps the
// one in use, and the log says why.
func reload(node *gateway.Node, path string, fl config.Flags, level *slog.LevelVar, logger *slog.Logger) {
	cfg, notes, err := config.LoadWithNotes(path, os.Environ(), fl)
	if err != nil {
		logger.Error("reload refused: keeping the configuration in use", "err", err)
		return
	}
	for _, n := range notes {
		logger.Warn("config: " + n)
	}
	applied, err := node.Reload(cfg)
	if err != nil && applied == nil {
		logger.Error("reload refused: keeping the configuration in use", "err", err)
		return
	}
	level.Set(parseLevel(cfg.LogLevel))
	logger.Info("configuration reloaded", "applied", strings.Join(append(applied, "log_level"), ", "))
	if err != nil {
		logger.Error("reload: some bridges did not start (they stay off until the next reload)", "err", err)
	}
}
