//go:build linux

package dbtest

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver the readiness probe and URLs are meant for
)

// ErrNoPostgres is wrapped by the errors of PostgresDatabase when no usable PostgreSQL
// installation exists, so that a harness can tell "cannot run here" from "broke".
var ErrNoPostgres = errors.New("dbtest: PostgreSQL not available")

// Postgres returns the URL of a new, empty database that only the calling test uses, on the test
// binary's shared private server (started on first use), and drops the database when the test
// ends. The URL is for the "pgx" database/sql driver (github.com/jackc/pgx/v5/stdlib).
//
// Without PostgreSQL binaries the test is skipped, or fails when the CI environment variable is
// true, so that a CI image missing them cannot pass silently.
func Postgres(tb testing.TB) string {
	tb.Helper()
	url, drop, err := PostgresDatabase()
	if err != nil {
		skipOrFail(tb, err)
	}
	tb.Cleanup(func() {
		if err := drop(); err != nil {
			tb.Logf("dbtest: %v", err)
		}
	})
	return url
}

// PostgresDatabase is Postgres for code without a testing.TB, such as a benchmark or end-to-end
// harness: it creates a new, empty database on the shared server and returns its URL and a
// function that drops it. The server stops when the process exits, or at StopAll.
func PostgresDatabase() (url string, drop func() error, err error) {
	inst, admin, name, err := sharedDatabaseName()
	if err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	drop = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// FORCE ends sessions the test left open, which would otherwise make the drop fail.
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		return nil
	}
	return inst.url(name), drop, nil
}

// StopAll stops the shared server and removes its files; a later Postgres call starts a new one.
// Call it from TestMain after m.Run, before any goroutine leak check. Without it the server still
// dies with the process (its parent-death signal), but its directory stays until the next start
// removes it.
func StopAll() error {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	inst, admin := shared.inst, shared.admin
	shared.inst, shared.admin, shared.err = nil, nil, nil
	if inst == nil {
		return nil
	}
	return errors.Join(admin.Close(), inst.destroy())
}

// shared is the one server per test binary that Postgres and PostgresDatabase create databases
// on. It is package state because no single test owns it: it outlives every test that uses it.
var shared struct {
	mu    sync.Mutex
	inst  *pgInstance
	admin *sql.DB // connected to the "postgres" database, for CREATE and DROP DATABASE
	err   error   // why the server could not start; every later caller gets it too
	next  int     // suffix of the next database's name
}

// sharedDatabaseName starts the shared server if it is not running and reserves a database name
// on it.
func sharedDatabaseName() (*pgInstance, *sql.DB, string, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.err != nil {
		return nil, nil, "", shared.err
	}
	if shared.inst == nil {
		inst, admin, err := startShared()
		if err != nil {
			shared.err = err
			return nil, nil, "", err
		}
		shared.inst, shared.admin = inst, admin
	}
	shared.next++
	return shared.inst, shared.admin, "t_" + strconv.Itoa(shared.next), nil
}

func startShared() (*pgInstance, *sql.DB, error) {
	inst, err := newPGInstance()
	if err != nil {
		return nil, nil, err
	}
	if err := inst.startOnFreePort(); err != nil {
		return nil, nil, errors.Join(err, inst.destroy())
	}
	admin, err := sql.Open("pgx", inst.url("postgres"))
	if err != nil {
		return nil, nil, errors.Join(err, inst.destroy())
	}
	return inst, admin, nil
}

// PGServer is a PostgreSQL server of one test's own, for tests that stop and restart it. It keeps
// its port and data across Stop and Start, so clients holding its URL can reconnect.
type PGServer struct {
	tb   testing.TB
	inst *pgInstance
}

// PostgresServer starts a dedicated server for the calling test (not the shared one: stopping
// that would break every other test) and removes it when the test ends. Skip and fail rules are
// those of Postgres.
func PostgresServer(tb testing.TB) *PGServer {
	tb.Helper()
	inst, err := newPGInstance()
	if err != nil {
		skipOrFail(tb, err)
	}
	tb.Cleanup(func() {
		if err := inst.destroy(); err != nil {
			tb.Errorf("dbtest: %v", err)
		}
	})
	if err := inst.startOnFreePort(); err != nil {
		tb.Fatal(err)
	}
	return &PGServer{tb: tb, inst: inst}
}

// URL returns the URL of the server's "postgres" database, which is empty and the test's own.
func (s *PGServer) URL() string { return s.inst.url("postgres") }

// Stop shuts the server down the way an operator would (fast shutdown: open sessions are ended,
// committed data is kept) and returns once it has exited. Call it from the test's goroutine.
func (s *PGServer) Stop() {
	s.tb.Helper()
	if err := s.inst.stop(); err != nil {
		s.tb.Fatal(err)
	}
}

// Start starts a stopped server again on the same port and data, and returns once it accepts
// connections; a running server is left as it is. Call it from the test's goroutine.
func (s *PGServer) Start() {
	s.tb.Helper()
	if err := s.inst.start(); err != nil {
		s.tb.Fatal(err)
	}
}

const (
	pgDirPrefix = "switchyard-pg-"
	pgLockName  = "owner.lock"
)

// pgInstance is one initialised data directory and the server running on it, if any.
type pgInstance struct {
	bin  string              // directory holding initdb and postgres
	dir  string              // temporary root: lock file, log, socket, data/
	cred *syscall.Credential // whom initdb and postgres run as; nil means as this process
	lock *os.File            // flock held for this process's lifetime, so sweeps spare dir
	port int

	mu   sync.Mutex
	proc *child // nil while stopped
}

// newPGInstance creates and initialises a data directory; the server is not started yet.
func newPGInstance() (*pgInstance, error) {
	bin, err := findPGBin()
	if err != nil {
		return nil, err
	}
	cred, err := pgCredential()
	if err != nil {
		return nil, err
	}
	base := tempBase(cred)
	sweepStale(base)
	dir, err := os.MkdirTemp(base, pgDirPrefix)
	if err != nil {
		return nil, err
	}
	p := &pgInstance{bin: bin, dir: dir, cred: cred}
	if err := p.setup(); err != nil {
		return nil, errors.Join(err, p.destroy())
	}
	return p, nil
}

// setup takes the directory's lock and runs initdb in it.
func (p *pgInstance) setup() error {
	lock, err := os.OpenFile(filepath.Join(p.dir, pgLockName), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	p.lock = lock
	// The descriptor is close-on-exec, so the lock is released when this process dies even if
	// the server it started lives on for a moment. The pid is written under the lock: a sweeper
	// that finds the file unlocked but not empty knows its owner has died.
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", p.dir, err)
	}
	if _, err := fmt.Fprintln(lock, os.Getpid()); err != nil {
		return err
	}
	if p.cred != nil {
		if err := os.Chown(p.dir, int(p.cred.Uid), int(p.cred.Gid)); err != nil {
			return err
		}
	}
	cmd := exec.Command(filepath.Join(p.bin, "initdb"),
		"-D", p.dataDir(), "-U", "postgres", "--auth=trust",
		"--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions")
	cmd.Dir = p.dir // the caller's working directory may be closed to the postgres user
	cmd.Env = childEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred, Pdeathsig: syscall.SIGKILL}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb in %s: %w\n%s", p.dir, err, out)
	}
	return nil
}

func (p *pgInstance) dataDir() string { return filepath.Join(p.dir, "data") }

func (p *pgInstance) url(database string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.port, database)
}

// startOnFreePort picks a port and starts the server, picking again when another process took
// the port between the pick and the server's bind.
func (p *pgInstance) startOnFreePort() error {
	var err error
	for range 3 {
		if p.port, err = freePort(); err != nil {
			return err
		}
		if err = p.start(); !errors.Is(err, errAddrInUse) {
			return err
		}
	}
	return err
}

func (p *pgInstance) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc != nil && !p.proc.exited() {
		return nil
	}
	p.proc = nil
	// A socket path longer than sun_path (108 bytes) would stop the server from starting; TCP is
	// what the URLs use, so the socket is only a convenience for psql -h.
	sockDir := p.dir
	if len(sockDir) > 80 {
		sockDir = ""
	}
	cmd := exec.Command(filepath.Join(p.bin, "postgres"),
		"-D", p.dataDir(),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "port="+strconv.Itoa(p.port),
		"-c", "unix_socket_directories="+sockDir,
		// Durability is worthless for throwaway data; these make commits and DDL fast.
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "wal_level=minimal",
		"-c", "max_wal_senders=0",
		// Each test binary has one server; its tests and their pools share these connections.
		"-c", "max_connections=200",
		"-c", "shared_buffers=16MB",
	)
	cmd.Dir = p.dir
	cmd.Env = childEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	url := p.url("postgres")
	ready := func(ctx context.Context) error {
		db, err := sql.Open("pgx", url)
		if err != nil {
			return err
		}
		defer db.Close()
		return db.PingContext(ctx)
	}
	// SIGQUIT is PostgreSQL's immediate shutdown: it does not wait for clients, which die with
	// the test binary anyway, and there is nothing worth a checkpoint.
	c, err := launch(cmd, filepath.Join(p.dir, "postgres.log"), syscall.SIGQUIT, ready)
	if err != nil {
		return fmt.Errorf("postgres on 127.0.0.1:%d (in %s): %w", p.port, p.dir, err)
	}
	p.proc = c
	return nil
}

func (p *pgInstance) stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.proc
	p.proc = nil
	if c == nil {
		return nil
	}
	// SIGINT is fast shutdown: sessions are ended rather than waited for, and data is kept.
	return c.stop(syscall.SIGINT, 30*time.Second)
}

// destroy stops the server and removes its directory.
func (p *pgInstance) destroy() error {
	err := p.stop()
	if rmErr := os.RemoveAll(p.dir); rmErr != nil {
		err = errors.Join(err, rmErr)
	}
	if p.lock != nil {
		p.lock.Close()
	}
	return err
}

// findPGBin returns the directory holding initdb and postgres. Debian keeps them out of PATH, in
// /usr/lib/postgresql/<major>/bin; the newest major wins.
func findPGBin() (string, error) {
	var dirs []string
	if p, err := exec.LookPath("initdb"); err == nil {
		// A symlink in PATH stands for the real installation; its directory is the one that also
		// holds postgres.
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dirs = append(dirs, filepath.Dir(p))
	}
	versioned, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	major := func(bin string) float64 {
		v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(bin)), 64)
		return v
	}
	sort.Slice(versioned, func(i, j int) bool { return major(versioned[i]) > major(versioned[j]) })
	dirs = append(dirs, versioned...)
	dirs = append(dirs, "/usr/local/pgsql/bin")
	for _, d := range dirs {
		if isExecutable(filepath.Join(d, "initdb")) && isExecutable(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", fmt.Errorf("%w: initdb and postgres not found (looked in $PATH, /usr/lib/postgresql/*/bin, /usr/local/pgsql/bin); install Debian's postgresql to run this test", ErrNoPostgres)
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// pgCredential returns whom initdb and postgres must run as. Both refuse to run as root, so as
// root they run as the postgres system user that Debian's package creates; setting the
// credential on the process itself (instead of a runuser or setpriv wrapper) keeps the server our
// direct child, which its parent-death signal needs.
func pgCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("%w: running as root, and PostgreSQL refuses to run as root, but there is no postgres user to run it as: %v", ErrNoPostgres, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	// Empty Groups drops root's supplementary groups.
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

// tempBase returns where to create server directories: the temporary directory, unless the
// server runs as another user who could not reach it (a private TMPDIR of root's).
func tempBase(cred *syscall.Credential) string {
	base := os.TempDir()
	if cred == nil {
		return base
	}
	for d := base; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return "/tmp"
		}
		if d == filepath.Dir(d) {
			return base
		}
	}
}

// sweepStale removes the server directories whose owning process has died and whose server has
// exited: a process that ends without StopAll cannot remove its own. An unlocked lock file that
// is still empty belongs to an owner between creating and locking it, and is spared.
func sweepStale(base string) {
	dirs, _ := filepath.Glob(filepath.Join(base, pgDirPrefix+"*"))
	for _, dir := range dirs {
		lock, err := os.OpenFile(filepath.Join(dir, pgLockName), os.O_RDWR, 0)
		if err != nil {
			continue
		}
		if syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			fi, err := lock.Stat()
			if pid := postmasterPID(dir); err == nil && fi.Size() > 0 && (pid == 0 || !alive(pid)) {
				os.RemoveAll(dir)
			}
		}
		lock.Close()
	}
}

// postmasterPID returns the server process recorded in dir's data directory, or 0 when none is.
func postmasterPID(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid"))
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(first))
	return pid
}

// alive reports whether pid is a running process. A zombie counts as dead: an orphaned server
// that exited may wait a long time for a reaper that never comes in a container.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses, which may itself contain ')'.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// The process plumbing below is shared with redis.go.

// errAddrInUse marks a start that failed because the chosen port was taken meanwhile.
var errAddrInUse = errors.New("address already in use")

// child is a started server process and the goroutine that waits for it.
type child struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// startChild starts cmd with the parent-death signal sig, so that the server dies with this
// process however it ends. The kernel sends that signal when the thread that forked the child
// exits, not the process; the waiting goroutine therefore forks from a thread locked to it and
// holds that thread until the child is gone.
func startChild(cmd *exec.Cmd, sig syscall.Signal) (*child, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = sig
	c := &child{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer close(c.done)
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait() // servers exit non-zero on signals; callers judge by what they sent
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return c, nil
}

// stop sends sig and waits up to grace for the exit, then kills the process.
func (c *child) stop(sig syscall.Signal, grace time.Duration) error {
	_ = c.cmd.Process.Signal(sig) // fails only when the process has already exited
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.done:
		return nil
	case <-t.C:
	}
	_ = c.cmd.Process.Kill()
	<-c.done
	return fmt.Errorf("%s did not exit within %v of %v and was killed", filepath.Base(c.cmd.Path), grace, sig)
}

// launch starts cmd with its output appended to logPath and waits up to 20 s until ready
// succeeds. On failure the process is killed and the error carries the tail of this start's log.
func launch(cmd *exec.Cmd, logPath string, sig syscall.Signal, ready func(context.Context) error) (*child, error) {
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	from, _ := logf.Seek(0, io.SeekEnd)
	cmd.Stdout, cmd.Stderr = logf, logf
	c, err := startChild(cmd, sig)
	logf.Close() // the child has its own descriptor
	if err != nil {
		return nil, err
	}
	if err := waitReady(c, ready); err != nil {
		c.stop(syscall.SIGKILL, 10*time.Second)
		tail := logTail(logPath, from)
		if strings.Contains(tail, "Address already in use") {
			err = fmt.Errorf("%w: %w", errAddrInUse, err)
		}
		return nil, fmt.Errorf("%w; log:\n%s", err, tail)
	}
	return c, nil
}

func waitReady(c *child, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		attempt, cancelAttempt := context.WithTimeout(ctx, 2*time.Second)
		err := ready(attempt)
		cancelAttempt()
		if err == nil {
			return nil
		}
		select {
		case <-c.done:
			return fmt.Errorf("exited before accepting connections (%v)", c.cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("not ready after 20s: %w", err)
		case <-tick.C:
		}
	}
}

// logTail returns the last part of what was written to path after offset from.
func logTail(path string, from int64) string {
	const keep = 4000
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if from <= int64(len(b)) {
		b = b[from:]
	}
	if len(b) > keep {
		b = b[len(b)-keep:]
	}
	return string(b)
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// childEnv is the environment of the servers: the C locale keeps their messages in English,
// which launch looks for, whatever the developer's locale.
func childEnv() []string { return append(os.Environ(), "LC_ALL=C", "LANG=C") }

// skipOrFail skips the test when err says an engine is not installed, unless CI is true: there a
// missing engine is a broken image, not a reason to pass.
func skipOrFail(tb testing.TB, err error) {
	tb.Helper()
	if errors.Is(err, ErrNoPostgres) || errors.Is(err, ErrNoRedis) {
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); !ci {
			tb.Skip(err)
		}
	}
	tb.Fatal(err)
}
