//go:build linux

package dbtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ErrNoRedis is wrapped by start errors when redis-server is not installed.
var ErrNoRedis = errors.New("dbtest: Redis not available")

// Redis starts a private redis-server for the calling test and returns its URL
// (redis://127.0.0.1:PORT/0); the server is stopped when the test ends. Skip and fail rules are
// those of Postgres.
func Redis(tb testing.TB) string {
	tb.Helper()
	return StartRedis(tb).URL()
}

// RedisServer is a private redis-server of one test. It keeps its port across Kill and Restart,
// so clients holding its URL can reconnect. It persists nothing: a restart starts empty, as a
// cache server without persistence would.
type RedisServer struct {
	tb   testing.TB
	bin  string
	dir  string
	port int

	mu   sync.Mutex
	proc *child // nil while killed
}

// StartRedis starts a private redis-server for the calling test and stops it when the test
// ends. Each call gets its own server: one starts in milliseconds.
func StartRedis(tb testing.TB) *RedisServer {
	tb.Helper()
	bin, err := findRedis()
	if err != nil {
		skipOrFail(tb, err)
	}
	r := &RedisServer{tb: tb, bin: bin, dir: tb.TempDir()}
	tb.Cleanup(func() { r.kill() })
	for range 3 {
		if r.port, err = freePort(); err != nil {
			tb.Fatal(err)
		}
		// Another process may take the port between the pick and the server's bind.
		if err = r.start(); !errors.Is(err, errAddrInUse) {
			break
		}
	}
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// URL returns redis://127.0.0.1:PORT/0.
func (r *RedisServer) URL() string { return "redis://" + r.Addr() + "/0" }

// Addr returns the server's host:port.
func (r *RedisServer) Addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

// Kill ends the server with SIGKILL, as a crash would, and returns once it has exited.
func (r *RedisServer) Kill() { r.kill() }

// Restart starts the server again on the same port, killing it first if it runs, and returns
// once it answers PING. Call it from the test's goroutine.
func (r *RedisServer) Restart() {
	r.tb.Helper()
	r.kill()
	if err := r.start(); err != nil {
		r.tb.Fatal(err)
	}
}

func (r *RedisServer) kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc != nil {
		r.proc.stop(syscall.SIGKILL, 10*time.Second)
		r.proc = nil
	}
}

func (r *RedisServer) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cmd := exec.Command(r.bin,
		"--port", strconv.Itoa(r.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", r.dir,
		"--daemonize", "no",
		"--logfile", "", // to stdout, which launch sends to the log file
	)
	cmd.Dir = r.dir
	cmd.Env = childEnv()
	addr := r.Addr()
	c, err := launch(cmd, filepath.Join(r.dir, "redis.log"), syscall.SIGKILL, func(ctx context.Context) error {
		return pingRedis(ctx, addr)
	})
	if err != nil {
		return fmt.Errorf("redis-server on %s: %w", addr, err)
	}
	r.proc = c
	return nil
}

// pingRedis sends one PING in RESP and expects +PONG.
func pingRedis(ctx context.Context, addr string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		conn.SetDeadline(deadline)
	}
	if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	// A loading server answers -LOADING; anything but PONG means not ready yet.
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

func findRedis() (string, error) {
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/bin/redis-server", "/usr/local/bin/redis-server"} {
		if isExecutable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: redis-server not found (looked in $PATH, /usr/bin, /usr/local/bin); install Debian's redis-server to run this test", ErrNoRedis)
}
