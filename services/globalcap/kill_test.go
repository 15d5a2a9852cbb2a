//go:build linux

package globalcap

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"switchyard/db/dbtest"
	"switchyard/services/resilience"
)

// replicaEnv hands TestReplicaProcess the URL of the Redis it takes its slots on.
const replicaEnv = "GLOBALCAP_TEST_REPLICA_REDIS"

const killTTL = 600 * time.Millisecond

// TestReplicaProcess is the replica that TestKilledReplicaFreesItsSlots runs as a process of its
// own: it takes both slots of connection 1, says so, and holds them (renewing) until killed.
func TestReplicaProcess(t *testing.T) {
	url := os.Getenv(replicaEnv)
	if url == "" {
		t.Skip("the replica of TestKilledReplicaFreesItsSlots")
	}
	l, err := Open(url, Options{Replica: "doomed", LeaseTTL: killTTL})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := l.Acquire(t.Context(), 1, 2, time.Second, 0); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Println("holding")
	time.Sleep(time.Minute) // a stream that outlasts the test; it is killed long before
}

func TestKilledReplicaFreesItsSlots(t *testing.T) {
	url := dbtest.Redis(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestReplicaProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), replicaEnv+"="+url)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := bufio.NewScanner(out)
	for lines.Scan() && lines.Text() != "holding" {
	}
	if lines.Err() != nil || lines.Text() != "holding" {
		t.Fatalf("the replica did not take its slots: %v", lines.Err())
	}

	live := open(t, url, "live", killTTL)
	time.Sleep(2 * killTTL) // the killed replica renewed its leases across lease times
	if _, err := live.TryAcquire(t.Context(), 1, 2); !errors.Is(err, resilience.ErrSlotsTaken) {
		t.Fatalf("before the kill: err = %v, want every slot taken", err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	for range 2 {
		rel, err := live.Acquire(t.Context(), 1, 2, 3*killTTL, 0)
		if err != nil {
			t.Fatalf("%v after the kill: %v", time.Since(killed), err)
		}
		defer rel()
	}
	waited := time.Since(killed)
	t.Logf("both slots free %v after the kill (lease time %v)", waited, killTTL)
	if waited > killTTL+killTTL/2 {
		t.Fatalf("the killed replica's slots came free after %v, lease time %v", waited, killTTL)
	}
}
