// Package bench is the benchmark harness behind `make bench`: the gateway and a bare
// httputil.ReverseProxy, each in its own process on 127.0.0.1, driven by the same load, compared
// by added latency, time to first token, CPU and memory. The tests carry the build tag bench so
// `make test` leaves them out; see bench_test.go for the knobs.
package bench
