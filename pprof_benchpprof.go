//go:build benchpprof

package main

// Profiles for `make bench` only (BENCH_PPROF): this file is compiled in with the benchpprof build
// tag, which no release build sets, so the gateway itself never serves pprof. With the tag, and
// SWITCHYARD_BENCH_PPROF_FILE naming a file, the process serves net/http/pprof on a loopback port
// of its own and writes that address into the file; the listener lives as long as the process.

import (
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof" // registers /debug/pprof/ on http.DefaultServeMux
	"os"
	"runtime/metrics"
)

func init() {
	file := os.Getenv("SWITCHYARD_BENCH_PPROF_FILE")
	if file == "" {
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return
	}
	if err := os.WriteFile(file, []byte(ln.Addr().String()), 0o600); err != nil {
		ln.Close()
		return
	}
	// The runtime's own gauges pprof does not show, the starting size of new goroutine stacks
	// (the runtime sizes it by the average stack in use) first.
	http.HandleFunc("/debug/runtime-metrics", func(w http.ResponseWriter, _ *http.Request) {
		samples := []metrics.Sample{{Name: "/gc/stack/starting-size:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"},
			{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"},
			{Name: "/memory/classes/heap/free:bytes"}, {Name: "/memory/classes/heap/released:bytes"},
			{Name: "/memory/classes/total:bytes"}, {Name: "/gc/heap/goal:bytes"}, {Name: "/gc/gogc:percent"},
			{Name: "/gc/gomemlimit:bytes"}, {Name: "/sched/goroutines:goroutines"}}
		metrics.Read(samples)
		for _, s := range samples {
			fmt.Fprintf(w, "%s %d\n", s.Name, s.Value.Uint64())
		}
	})
	go http.Serve(ln, nil) //nolint:errcheck // ends with the process
}
