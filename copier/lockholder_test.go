package copier

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// holderEnv makes the test binary, re-executed, a lock holder: it takes
// the fcntl lock FileChannel.tryLock takes on the file the variable
// names, says "locked", and keeps it until its stdin closes.
const holderEnv = "TIERD_TEST_HOLD_LOCK"

func TestMain(m *testing.M) {
	if p := os.Getenv(holderEnv); p != "" {
		os.Exit(holdLock(p))
	}
	os.Exit(m.Run())
}

// holdLock is the re-executed test binary's work (see holderEnv).
func holdLock(path string) int {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		os.Stdout.WriteString("error " + err.Error() + "\n")
		return 1
	}
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0, Start: 0, Len: 0}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lk); err != nil {
		os.Stdout.WriteString("error " + err.Error() + "\n")
		return 1
	}
	os.Stdout.WriteString("locked\n")
	io.Copy(io.Discard, os.Stdin)
	// f must outlive the wait: were it collected meanwhile, its finalizer
	// would close the descriptor, and a close drops the process's POSIX
	// locks on the file (the holder then holds nothing while it says it
	// does).
	runtime.KeepAlive(f)
	return 0
}

// lockProc is another process holding a lock on a file.
type lockProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	pid   int
}

// release ends the holder (its lock goes with it) and waits for it.
func (l *lockProc) release(t *testing.T) {
	t.Helper()
	if l.cmd == nil {
		return
	}
	l.stdin.Close()
	if err := l.cmd.Wait(); err != nil {
		t.Errorf("lock holder %d: %v", l.pid, err)
	}
	l.cmd = nil
}

// startHolder starts cmd, which locks a file, prints "locked" when it
// holds the lock and keeps it until its stdin closes; the test ends it.
func startHolder(t *testing.T, cmd *exec.Cmd) *lockProc {
	t.Helper()
	l, err := spawnHolder(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.release(t) })
	return l
}

// spawnHolder is startHolder for any goroutine: the caller ends it.
func spawnHolder(cmd *exec.Cmd) (*lockProc, error) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	l := &lockProc{cmd: cmd, stdin: stdin, pid: cmd.Process.Pid}
	line, err := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "locked" {
		stdin.Close()
		cmd.Wait()
		return nil, fmt.Errorf("lock holder said %q (%v)", line, err)
	}
	return l, nil
}

// goHolderCmd is this test binary, run as a second process holding a
// POSIX fcntl lock on path: the lock Kafka's FileChannel.tryLock takes.
func goHolderCmd(path string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holderEnv+"="+path)
	return cmd
}

// goHolder starts goHolderCmd for the test.
func goHolder(t *testing.T, path string) *lockProc {
	t.Helper()
	return startHolder(t, goHolderCmd(path))
}

// brokerLockJava is what a Kafka broker's LogManager does to each log
// dir's .lock (FileLock: FileChannel.open(CREATE, READ, WRITE), then
// tryLock()), kept until stdin closes.
const brokerLockJava = `import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;

public class BrokerLock {
    public static void main(String[] args) throws Exception {
        try (FileChannel ch = FileChannel.open(Paths.get(args[0]), StandardOpenOption.CREATE, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            FileLock lock = ch.tryLock();
            if (lock == null) {
                System.out.println("busy");
                System.exit(1);
            }
            System.out.println("locked");
            System.out.flush();
            while (System.in.read() >= 0) {
            }
        }
    }
}
`

// javaHolder starts a JVM that locks path as a Kafka broker locks its
// log dir's .lock. It skips the test when no java is installed.
func javaHolder(t *testing.T, path string) *lockProc {
	t.Helper()
	return startHolder(t, javaCmd(t, path))
}

// javaCmd is the command javaHolder runs: a JVM that locks path as a
// Kafka broker locks its log dir's .lock, saying "locked", or "busy"
// (and exiting 1) when another process holds it. It skips the test
// when no java is installed.
func javaCmd(t *testing.T, path string) *exec.Cmd {
	t.Helper()
	java, err := exec.LookPath("java")
	if err != nil {
		t.Skip("java is not installed: this test locks .lock with Java's FileChannel.tryLock, as a Kafka broker does; " +
			"the same fcntl lock from a Go helper process is tested without it (TestBrokerLockTakenMidPass, TestLockHolder)")
	}
	src := filepath.Join(t.TempDir(), "BrokerLock.java")
	if err := os.WriteFile(src, []byte(brokerLockJava), 0o644); err != nil {
		t.Fatal(err)
	}
	return exec.Command(java, src, path) // Java 11+ runs a single source file
}
