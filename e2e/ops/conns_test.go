package ops

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"switchyard/e2e/testenv"
)

// rawConn is one hand-driven keep-alive connection to the gateway.
type rawConn struct {
	net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, base, from string) *rawConn {
	c := testenv.RawFrom(t, base, from)
	return &rawConn{Conn: c, br: bufio.NewReader(c)}
}

// do sends one request head and reads the answer; 0 when the gateway closed the connection.
func (c *rawConn) do(head string) int {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, head); err != nil {
		return 0
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// closedWithin reports whether the gateway closes the connection within d.
func (c *rawConn) closedWithin(d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := c.br.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

const healthHead = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"

// One client address may keep only so many anonymous connections idle
// (--max-conns-per-client): another one is closed once it has answered. Many connections at once
// are all served, an authenticated one does not count, another address and a trusted proxy are
// not affected.
func TestIdleAnonymousConnectionsAreCappedPerClient(t *testing.T) {
	e := testenv.New(t, "--max-conns-per-client", "3", "--anonymous-idle-timeout", "1m", "--trusted-proxies", "127.0.6.9")
	key := e.NewKey()
	var conns []*rawConn
	for range 5 { // opened at once, before any request
		conns = append(conns, dialRaw(t, e.Base, "127.0.6.1"))
	}
	for i, c := range conns[:4] {
		if st := c.do(healthHead); st != 200 {
			t.Fatalf("connection %d: %d", i, st)
		}
	}
	var closed []int
	for i, c := range conns[:4] {
		if c.closedWithin(300 * time.Millisecond) {
			closed = append(closed, i)
		}
	}
	if len(closed) != 1 {
		t.Fatalf("connections %v of four idle anonymous ones were closed, want one", closed)
	}
	kept := make([]*rawConn, 0, 3)
	for i, c := range conns[:4] {
		if i != closed[0] {
			kept = append(kept, c)
		}
	}
	if c := dialRaw(t, e.Base, "127.0.6.2"); c.do(healthHead) != 200 || c.closedWithin(300*time.Millisecond) {
		t.Fatal("another address was held to the first one's cap")
	}
	// One of the three proves a client key: it no longer counts, so the fifth may stay.
	if st := kept[0].do("GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + key + "\r\n\r\n"); st != 200 {
		t.Fatalf("authenticated request: %d", st)
	}
	if conns[4].do(healthHead) != 200 || conns[4].closedWithin(300*time.Millisecond) {
		t.Fatal("an idle connection was closed although one of the three authenticated")
	}
	// A trusted proxy carries many clients: no cap.
	for i := range 6 {
		if c := dialRaw(t, e.Base, "127.0.6.9"); c.do(healthHead) != 200 || c.closedWithin(20*time.Millisecond) {
			t.Fatalf("trusted proxy: connection %d closed", i)
		}
	}
}

// An anonymous connection is closed after the short anonymous idle timeout; an authenticated
// one keeps the long one.
func TestAnonymousConnectionsHaveAShortIdleTimeout(t *testing.T) {
	e := testenv.New(t, "--anonymous-idle-timeout", "300ms")
	anon, admin := dialRaw(t, e.Base, "127.0.6.5"), dialRaw(t, e.Base, "127.0.6.6")
	start := time.Now()
	if anon.do(healthHead) != 200 ||
		admin.do("GET /api/providers HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "+testenv.AdminToken+"\r\n\r\n") != 200 {
		t.Fatal("requests failed")
	}
	if !anon.closedWithin(5 * time.Second) {
		t.Fatal("the anonymous connection stayed open")
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Fatalf("the anonymous connection was closed after %v, before the anonymous idle timeout", took)
	}
	if admin.closedWithin(1500 * time.Millisecond) {
		t.Fatal("the authenticated connection was closed at the anonymous idle timeout")
	}
	if admin.do(healthHead) != 200 {
		t.Fatal("the authenticated connection no longer serves")
	}
}

// floodHelperEnv names the address a flood helper process (this test binary, run again) opens
// its connections to.
const floodHelperEnv = "SWITCHYARD_FLOOD_ADDR"

// TestFloodHelper is not a test: TestIdleConnectionFloodLeavesRoomForWhatMatters runs this
// binary again with floodHelperEnv set, and then this opens SWITCHYARD_FLOOD_CONNS connections
// to the gateway, 50 from each loopback address 127.<SWITCHYARD_FLOOD_NET>.x.y (within the
// per-client cap: the budget alone has to hold), sends one
// GET /health on each, keeps them all open, prints how many were answered and waits for its
// stdin to close.
func TestFloodHelper(t *testing.T) {
	addr := os.Getenv(floodHelperEnv)
	if addr == "" {
		t.Skip("runs only as the flood test's helper process")
	}
	n, _ := strconv.Atoi(os.Getenv("SWITCHYARD_FLOOD_CONNS"))
	netByte, _ := strconv.Atoi(os.Getenv("SWITCHYARD_FLOOD_NET"))
	var answered, failed atomic.Int64
	conns := make([]net.Conn, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			br := bufio.NewReaderSize(nil, 1024)
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				from := net.IPv4(127, byte(netByte), byte(i/50/250), byte(i/50%250+1))
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: from}, Timeout: 10 * time.Second}
				c, err := d.Dial("tcp", addr)
				if err != nil {
					failed.Add(1)
					continue
				}
				conns[i] = c
				c.SetDeadline(time.Now().Add(10 * time.Second))
				br.Reset(c)
				if _, err := io.WriteString(c, healthHead); err != nil {
					failed.Add(1)
					continue
				}
				if resp, err := http.ReadResponse(br, nil); err == nil && resp.StatusCode == 200 {
					io.Copy(io.Discard, resp.Body)
					answered.Add(1)
				} else {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	fmt.Printf("flood answered=%d failed=%d\n", answered.Load(), failed.Load())
	io.Copy(io.Discard, os.Stdin) // hold the connections until the test is done
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
}

// About 20,000 anonymous keep-alive connections (one cheap request each, then idle: more than
// the gateway's 20,000 file descriptors) must not starve it: the health probe, the login page, a
// logged-in dashboard page and an authenticated proxy call are still answered promptly. The
// anonymous idle timeout is set long here, so the budget and its reserve alone must do it: at
// the budget the longest idle anonymous connections are closed for new ones. The flood comes
// from two helper processes (each holds up to 20,000 descriptors), from many loopback addresses.
func TestIdleConnectionFloodLeavesRoomForWhatMatters(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 21,000 connections")
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Max < 10_000 || lim.Max > 40_000 {
		t.Skipf("the open files limit (%d) is not what this test is sized for", lim.Max)
	}
	perHelper := int(lim.Max)/2 + 500 // together past the gateway's own limit
	up := testenv.NewFakeUpstream(t, testenv.JSONAnswer(testenv.CompletionJSON))
	bin := testenv.BuildBinary(t)
	addr := freeAddr(t)
	base := "http://" + addr
	logs := &testenv.SyncBuffer{}
	cmd := exec.Command(bin, "serve", "--addr", addr, "--data-dir", t.TempDir(), "--log-level", "info",
		"--anonymous-idle-timeout", "10m")
	cmd.Env = append(os.Environ(), "SWITCHYARD_ADMIN_TOKEN="+testenv.AdminToken, "SWITCHYARD_ADMIN_PASSWORD="+testenv.Password)
	cmd.Stderr = logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitReady(t, base)
	if want := fmt.Sprintf("limit=%d", lim.Max); !strings.Contains(logs.String(), want) {
		t.Fatalf("the start log does not report the open files limit (%s):\n%s", want, logs.String())
	}

	// What must keep working: a provider, a client key, a dashboard session.
	for _, c := range []struct {
		path string
		body any
	}{
		{"/api/providers", map[string]any{"name": "up", "type": "openai-compatible", "base_url": up.URL + "/v1"}},
		{"/api/connections", map[string]any{"provider": "up", "name": "main", "auth_type": "api_key", "api_key": "sk-up"}},
	} {
		if st, out, err := adminCall(base, "POST", c.path, c.body); err != nil || st != 201 {
			t.Fatalf("POST %s: %d %v %v", c.path, st, out, err)
		}
	}
	_, keyOut, err := adminCall(base, "POST", "/api/keys", map[string]any{"name": "flood"})
	if err != nil {
		t.Fatal(err)
	}
	key := keyOut["key"].(string)
	chat := func() (int, error) {
		req, _ := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(testenv.ChatBody))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := probeClient().Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	deadline := time.Now().Add(10 * time.Second)
	for st, _ := chat(); st != 200; st, _ = chat() {
		if time.Now().After(deadline) {
			t.Fatalf("the proxy call never succeeded: %d", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	jar, _ := cookiejar.New(nil)
	dash := probeClient()
	dash.Jar = jar
	if resp, err := dash.PostForm(base+"/login", url.Values{"password": {testenv.Password}}); err != nil || resp.StatusCode != 303 {
		t.Fatalf("login: %v", err)
	}

	// The flood.
	start := time.Now()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	var reports []chan string
	for h := range 2 {
		hc := exec.Command(self, "-test.run=^TestFloodHelper$", "-test.count=1")
		hc.Env = append(os.Environ(), floodHelperEnv+"="+addr, "SWITCHYARD_FLOOD_CONNS="+strconv.Itoa(perHelper),
			"SWITCHYARD_FLOOD_NET="+strconv.Itoa(h+1))
		hc.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		hc.Stderr = os.Stderr
		stdin, err := hc.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := hc.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := hc.Start(); err != nil {
			t.Fatal(err)
		}
		report := make(chan string, 1)
		go func() { // ends when the helper exits
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "flood ") {
					report <- sc.Text()
				}
			}
		}()
		t.Cleanup(func() { stdin.Close(); hc.Wait() })
		reports = append(reports, report)
	}
	for _, report := range reports {
		select {
		case line := <-report:
			var answered, failed int
			fmt.Sscanf(line, "flood answered=%d failed=%d", &answered, &failed)
			t.Logf("helper: %d connections answered, %d failed", answered, failed)
			total += answered
		case <-time.After(60 * time.Second): // it takes about 10 s
			t.Fatal("a flood helper did not finish")
		}
	}
	t.Logf("%d idle anonymous connections opened in %v", total, time.Since(start))
	if total < int(lim.Max) {
		t.Fatalf("only %d flood connections were answered: the flood did not pass the gateway's file limit", total)
	}

	// What matters is still answered, promptly.
	probe := func(what string, do func() (int, error), want int) {
		t.Helper()
		begin := time.Now()
		st, err := do()
		if err != nil || st != want || time.Since(begin) > 3*time.Second {
			t.Errorf("%s during the flood: %d %v after %v", what, st, err, time.Since(begin))
		}
	}
	get := func(c *http.Client, path string) func() (int, error) {
		return func() (int, error) {
			resp, err := c.Get(base + path)
			if err != nil {
				return 0, err
			}
			resp.Body.Close()
			return resp.StatusCode, nil
		}
	}
	probe("GET /health", get(probeClient(), "/health"), 200)
	probe("GET /login", get(probeClient(), "/login"), 200)
	probe("GET / with a session", get(dash, "/"), 200)
	probe("POST /v1/chat/completions", chat, 200)
	if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", cmd.Process.Pid)); err == nil {
		t.Logf("the gateway holds %d file descriptors of %d", len(fds), lim.Max)
	}
	if strings.Contains(logs.String(), "too many open files") {
		t.Errorf("the gateway ran out of file descriptors")
	}
}

// probeClient is a client that opens a new connection for every request, with a bound.
func probeClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
