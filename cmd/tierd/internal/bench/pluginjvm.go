package bench

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// This file holds the plugin case's two child processes besides MinIO:
// the JVM that runs the tierd plugin (kafka-rsm's driver class
// io.tierd.kafka.driver.PluginBench, one command a line on its stdin, one
// JSON answer a line on its stdout), and the "tierd run" child that
// serves the RSM endpoint.

// pluginJars are the jars the JVM runs with, in Config.PluginJars: Kafka's
// API stand-ins (with RetriableRemoteStorageException, as Kafka 4.2+), the
// plugin and its driver (make kafka-rsm-driver).
var pluginJars = []string{"kafka-rsm-api-stubs.jar", "tierd-kafka-rsm.jar", "tierd-kafka-rsm-driver.jar"}

// pluginTopicID is the topic id (KIP-516) the JVM gives the bench's
// partition in its copies' metadata.
const pluginTopicID = "B3_HiNPgSQ6oxG9ZZ6ED5A"

// preparePlugin finds java and the plugin's jars, building them first
// (kafka-rsm/build.sh driver) when cfg.PluginSource is set, javac is on
// PATH and a jar is missing or older than a source file. It returns the
// java launcher and the class path, or skip: why the plugin case cannot
// run here (no JDK, no jars), for the report.
func preparePlugin(cfg Config, progress io.Writer) (java string, classPath []string, skip string) {
	java = cfg.Java
	if java == "" {
		var err error
		if java, err = exec.LookPath("java"); err != nil {
			return "", nil, "java not found on PATH: the plugin cases need a JDK 11 or later (Debian: apt-get install openjdk-17-jdk-headless)"
		}
	}
	for _, j := range pluginJars {
		classPath = append(classPath, filepath.Join(cfg.PluginJars, j))
	}
	if cfg.PluginSource != "" && stale(classPath, cfg.PluginSource) {
		if _, err := exec.LookPath("javac"); err != nil {
			if missing(classPath) != "" {
				return "", nil, "javac not found on PATH, and the plugin's jars are not built: install a JDK (Debian: openjdk-17-jdk-headless), or run make kafka-rsm-driver where one is"
			}
			fmt.Fprintf(progress, "plugin: javac not found; using the jars in %s, older than their sources\n", cfg.PluginJars)
		} else {
			start := time.Now()
			cmd := exec.Command(filepath.Join(cfg.PluginSource, "build.sh"), "driver")
			if out, err := cmd.CombinedOutput(); err != nil {
				return "", nil, fmt.Sprintf("building the plugin (%s driver) failed: %v: %s", cmd.Path, err, strings.TrimSpace(string(out)))
			}
			fmt.Fprintf(progress, "plugin: built the jars into %s in %s\n", cfg.PluginJars, time.Since(start).Round(time.Millisecond))
		}
	}
	if m := missing(classPath); m != "" {
		return "", nil, fmt.Sprintf("%s not found: build the plugin and its driver with make kafka-rsm-driver (needs javac), or point --kafka-rsm-jars at them", m)
	}
	return java, classPath, ""
}

// missing returns the first of files that does not exist, or "".
func missing(files []string) string {
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			return f
		}
	}
	return ""
}

// stale reports whether a jar is missing or older than a file under the
// plugin's source dir.
func stale(jars []string, src string) bool {
	oldest := time.Time{}
	for _, j := range jars {
		info, err := os.Stat(j)
		if err != nil {
			return true
		}
		if oldest.IsZero() || info.ModTime().Before(oldest) {
			oldest = info.ModTime()
		}
	}
	newer := false
	filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || newer {
			return nil
		}
		if d.IsDir() && d.Name() == "build" {
			return filepath.SkipDir
		}
		if info, err := d.Info(); err == nil && !d.IsDir() && info.ModTime().After(oldest) {
			newer = true
		}
		return nil
	})
	return newer
}

// jvm is the JVM running PluginBench over the bench's partition dir.
type jvm struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // its stdout, a line at a time; closed at its end
	stderr *lockedBuffer
	exited chan struct{}
}

// jvmAnswer is one answer of PluginBench: the call's time (ns) and the
// bytes it moved; readers adds each read's latency.
type jvmAnswer struct {
	Error string  `json:"error"`
	OK    bool    `json:"ok"`
	NS    int64   `json:"ns"`
	Bytes int64   `json:"bytes"`
	LatNS []int64 `json:"lat_ns"`
}

// jvmOptions are the JVM's options: the heap and collector Kafka's
// kafka-server-start.sh and kafka-run-class.sh give a broker, the heap
// touched at start (-XX:+AlwaysPreTouch), as a broker that has run a
// while has touched its own: a fresh heap's first touch (page faults)
// would be charged to the first calls timed.
var jvmOptions = []string{"-Xms1g", "-Xmx1g", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+AlwaysPreTouch",
	"-Xlog:all=warning:stderr"} // the JVM's own log lines (JFR's start) stay off the answers

// startJVM starts PluginBench over partition dir dir; with profileDir, a
// Java Flight Recording of the JVM goes to <profileDir>/plugin.jfr ("jfr
// print --events jdk.ExecutionSample", or JDK Mission Control).
func startJVM(java string, classPath []string, dir, profileDir string) (*jvm, error) {
	opts := append([]string{}, jvmOptions...)
	if profileDir != "" {
		opts = append(opts, "-XX:StartFlightRecording=settings=profile,filename="+filepath.Join(profileDir, "plugin.jfr"))
	}
	args := append(opts, "-cp", strings.Join(classPath, string(os.PathListSeparator)),
		"io.tierd.kafka.driver.PluginBench", "--dir", dir, "--topic-id", pluginTopicID)
	j := &jvm{cmd: exec.Command(java, args...), lines: make(chan string, 1), stderr: &lockedBuffer{}, exited: make(chan struct{})}
	j.cmd.Stderr = j.stderr
	j.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // goes with the bench
	var err error
	if j.stdin, err = j.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := j.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := j.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", java, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 64<<20) // readers' answers list every read's latency
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, "{") {
				j.lines <- l
			} else { // a line of the JVM's own (JFR prints its start to stdout)
				j.stderr.Write([]byte(l + "\n"))
			}
		}
		close(j.lines)
	}()
	go func() { j.cmd.Wait(); close(j.exited) }()
	return j, nil
}

// do sends one command and returns its answer. Errors: the JVM's error
// answer, its end (with its stderr), ctx's end or a 10-minute silence
// (the JVM is killed then).
func (j *jvm) do(ctx context.Context, format string, args ...any) (jvmAnswer, error) {
	line := fmt.Sprintf(format, args...)
	name, _, _ := strings.Cut(line, " ")
	if _, err := io.WriteString(j.stdin, line+"\n"); err != nil {
		return jvmAnswer{}, fmt.Errorf("plugin JVM: %s: %w: %s", name, err, j.stderr.String())
	}
	t := time.NewTimer(10 * time.Minute)
	defer t.Stop()
	select {
	case l, ok := <-j.lines:
		if !ok {
			<-j.exited
			return jvmAnswer{}, fmt.Errorf("plugin JVM ended during %s (%v): %s", name, j.cmd.ProcessState, j.stderr.String())
		}
		var a jvmAnswer
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			return a, fmt.Errorf("plugin JVM: %s: answer %q: %w", name, l, err)
		}
		if a.Error != "" {
			return a, fmt.Errorf("plugin JVM: %s: %s", name, a.Error)
		}
		return a, nil
	case <-ctx.Done():
		j.kill()
		return jvmAnswer{}, ctx.Err()
	case <-t.C:
		j.kill()
		return jvmAnswer{}, fmt.Errorf("plugin JVM: %s: no answer in 10 minutes", name)
	}
}

func (j *jvm) pid() int { return j.cmd.Process.Pid }

func (j *jvm) kill() {
	j.cmd.Process.Kill()
	<-j.exited
}

// stop asks the JVM to end, and kills it after 10 s.
func (j *jvm) stop() {
	io.WriteString(j.stdin, "quit\n")
	j.stdin.Close()
	select {
	case <-j.exited:
	case <-time.After(10 * time.Second):
		j.kill()
	}
}

// rsmChild is what a "tierd run" child serving the RSM endpoint needs
// beyond startChild's settings: its listen address, metadata dir (its
// own: a topic tiered both ways is refused, and the bench's metadata
// holds its own copies of the partition) and token file.
type rsmChild struct {
	addr, metaDir, tokenFile, token string
}

// newRSMChild writes a token file under dir and returns the child's
// settings (its address is picked at its first start).
func newRSMChild(dir string) (*rsmChild, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	rc := &rsmChild{metaDir: filepath.Join(dir, "rsm-metadata"), tokenFile: filepath.Join(dir, "rsm.token"), token: hex.EncodeToString(b[:])}
	return rc, os.WriteFile(rc.tokenFile, []byte(rc.token+"\n"), 0o600)
}

// yaml is the child's copier (none: the endpoint alone) and rsm
// sections, logDir the broker's log dir.
func (rc *rsmChild) yaml(logDir string) string {
	return fmt.Sprintf("rsm:\n  enabled: true\n  listen: %q\n  token_file: %q\n  log_dirs: [%q]\n", rc.addr, rc.tokenFile, logDir)
}

// endpoint is the RSM endpoint's URL.
func (rc *rsmChild) endpoint() string { return "http://" + rc.addr }

// call sends one request to the RSM endpoint with the token and returns
// its status.
func (rc *rsmChild) call(ctx context.Context, method, path string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, rc.endpoint()+path, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+rc.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// healthy reports whether the endpoint answers its health check 200.
func (rc *rsmChild) healthy() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	code, err := rc.call(ctx, http.MethodGet, "/v1/health")
	return err == nil && code == http.StatusOK
}

// deleteCopy deletes a copy through the endpoint (DELETE C, 204 whether
// or not it is there): the clean-up of copies the JVM may not have
// deleted.
func (rc *rsmChild) deleteCopy(ctx context.Context, base int64, id string) error {
	code, err := rc.call(ctx, http.MethodDelete, fmt.Sprintf("/v1/segments/%s/0/%d/%s", topic, base, id))
	if err == nil && code != http.StatusNoContent {
		err = fmt.Errorf("DELETE of copy %s: status %d", id, code)
	}
	return err
}

var errNoBinary = errors.New("the plugin cases need a tierd binary for their tierd run child (tierd bench sets it)")
