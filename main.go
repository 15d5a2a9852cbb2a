// Command switchyard is a self-hosted LLM gateway. main reads the command line and the
// environment and runs the app; everything else lives in app/.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"switchyard/app"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr))
}

func run(args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	cfg, cmd, err := app.ParseConfig(args, lookupEnv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "switchyard:", err)
		return 2
	}
	switch cmd {
	case "version":
		fmt.Fprintln(stdout, "switchyard", version)
		return 0
	case "serve":
	case "help":
		fmt.Fprint(stderr, app.Usage)
		return 0
	default:
		fmt.Fprintf(stderr, "switchyard: unknown command %q (try --help)\n", cmd)
		return 2
	}
	log, err := app.NewLogger(cfg, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "switchyard:", err)
		return 2
	}
	defer app.CloseLogger(log)
	app.Version = version
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a, err := app.Start(ctx, cfg, lookupEnv, log)
	if err != nil {
		log.Error("start failed", "error", err)
		return 1
	}
	<-ctx.Done()
	stop()
	log.Info("shutting down", "grace", cfg.ShutdownGrace)
	if err := a.Shutdown(cfg.ShutdownGrace); err != nil {
		log.Error("shutdown", "error", err)
		return 1
	}
	log.Info("stopped")
	return 0
}
