//go:build linux

package dbtest

import (
	"bufio"
	"database/sql"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if err := StopAll(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

func openPG(t *testing.T, url string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func publicTables(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	err := db.QueryRow(`SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestPostgresGivesEachCallAnEmptyDatabaseOfItsOwn(t *testing.T) {
	urlA, urlB := Postgres(t), Postgres(t)
	if urlA == urlB {
		t.Fatalf("both calls returned %s", urlA)
	}
	a, b := openPG(t, urlA), openPG(t, urlB)
	if n := publicTables(t, a); n != 0 {
		t.Fatalf("first database has %d tables, want none", n)
	}
	if _, err := a.Exec(`CREATE TABLE marker (id INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Exec(`INSERT INTO marker (id) VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	if n := publicTables(t, a); n != 1 {
		t.Fatalf("first database has %d tables after CREATE TABLE, want 1", n)
	}
	if n := publicTables(t, b); n != 0 {
		t.Fatalf("second database has %d tables, want none: the databases are not separate", n)
	}
}

func TestPostgresDatabaseDropRemovesTheDatabase(t *testing.T) {
	url, drop, err := PostgresDatabase()
	if err != nil {
		skipOrFail(t, err)
	}
	db := openPG(t, url)
	if err := db.Ping(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if err := drop(); err != nil {
		t.Fatal(err)
	}
	err = openPG(t, url).Ping()
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("connecting after drop: %v, want a does-not-exist error", err)
	}
}

func TestPGServerKeepsDataAndURLAcrossStopAndStart(t *testing.T) {
	s := PostgresServer(t)
	url := s.URL()
	db := openPG(t, url)
	if _, err := db.Exec(`CREATE TABLE kept (v TEXT)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO kept (v) VALUES ('before stop')`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s.Stop()
	if err := openPG(t, url).Ping(); err == nil {
		t.Fatal("a new connection succeeded while the server was stopped")
	}

	s.Start()
	var v string
	if err := openPG(t, url).QueryRow(`SELECT v FROM kept`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v != "before stop" {
		t.Fatalf("read %q after restart, want %q", v, "before stop")
	}
}

// ping does one RESP exchange by hand, independent of the helper's own readiness probe.
func ping(addr string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSpace(line), err
}

func TestRedisURLAnswersPing(t *testing.T) {
	url := Redis(t)
	addr, ok := strings.CutPrefix(url, "redis://")
	addr, ok2 := strings.CutSuffix(addr, "/0")
	if !ok || !ok2 || !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("URL %q, want redis://127.0.0.1:PORT/0", url)
	}
	if got, err := ping(addr); err != nil || got != "+PONG" {
		t.Fatalf("PING: %q, %v", got, err)
	}
}

func TestRedisKillAndRestartOnTheSamePort(t *testing.T) {
	r := StartRedis(t)
	if got, err := ping(r.Addr()); err != nil || got != "+PONG" {
		t.Fatalf("PING before kill: %q, %v", got, err)
	}
	r.Kill()
	if got, err := ping(r.Addr()); err == nil {
		t.Fatalf("PING after kill answered %q", got)
	}
	r.Restart()
	if got, err := ping(r.Addr()); err != nil || got != "+PONG" {
		t.Fatalf("PING after restart: %q, %v", got, err)
	}
}

// TestSharedServerDiesWithItsProcess runs a copy of this test binary that starts the shared
// server and is then killed without any cleanup, and checks that the server goes with it and
// that the next sweep removes the directory it left.
func TestSharedServerDiesWithItsProcess(t *testing.T) {
	if os.Getenv("DBTEST_HOLD_SERVER") == "1" {
		holdSharedServer()
		return
	}
	if _, err := findPGBin(); err != nil {
		skipOrFail(t, err)
	}
	// Orphans go to the nearest subreaper, else to init, which in a container may never reap
	// them. Becoming one for this test lets it reap the server it orphans.
	const prSetChildSubreaper = 36
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		t.Fatalf("PR_SET_CHILD_SUBREAPER: %v", errno)
	}
	defer syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 0, 0)
	cmd := exec.Command(os.Args[0], "-test.run=^TestSharedServerDiesWithItsProcess$")
	cmd.Env = append(os.Environ(), "DBTEST_HOLD_SERVER=1")
	cmd.Stderr = os.Stderr
	// The helper holds the server until its stdin closes, which also ends it should this test
	// die before killing it.
	hold, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	var pid int
	var dir string
	line, err := bufio.NewReader(out).ReadString('\n')
	if _, scanErr := fmt.Sscanf(line, "server %d %s", &pid, &dir); err != nil || scanErr != nil {
		t.Fatalf("helper said %q (%v, %v)", line, err, scanErr)
	}
	if !alive(pid) {
		t.Fatalf("server %d is not running while its process lives", pid)
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	// The orphaned server was reparented to this process, so waiting for it both observes its
	// exit and reaps it.
	reaped := make(chan error, 1)
	go func() {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		reaped <- err
	}()
	timeout := time.NewTimer(20 * time.Second)
	defer timeout.Stop()
	select {
	case err := <-reaped:
		if err != nil {
			t.Fatalf("waiting for server %d: %v", pid, err)
		}
	case <-timeout.C:
		syscall.Kill(pid, syscall.SIGKILL)
		<-reaped
		t.Fatalf("server %d still ran 20s after its process was killed", pid)
	}

	sweepStale(filepath.Dir(dir))
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("sweep left %s behind (%v)", dir, err)
	}
}

// holdSharedServer is the killed process of TestSharedServerDiesWithItsProcess: it reports the
// server's pid and directory and waits to be killed (or for its stdin to close).
func holdSharedServer() {
	if _, _, err := PostgresDatabase(); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	shared.mu.Lock()
	fmt.Printf("server %d %s\n", shared.inst.proc.cmd.Process.Pid, shared.inst.dir)
	shared.mu.Unlock()
	io.Copy(io.Discard, os.Stdin)
}
