package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/userland-dev/userland/internal/simcluster"
	"github.com/userland-dev/userland/internal/testenv"
)

// auditPolicy records the metadata (who, verb, resource, when) of the
// components' requests, which the API economy is counted from, and of the
// pods in the wake namespace, which wake latency is timed from. Nothing
// else: auditing every request cost the API server a fifth of its CPU,
// and more on the side with more requests.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
  - level: Metadata
    users: [bench-controller, bench-gateway]
  - level: Metadata
    namespaces: [gw]
    resources:
      - group: ""
        resources: [pods, pods/status, pods/binding]
  - level: None
`

// startCluster runs the full simulated cluster with an audit log, so API
// economy is counted by the API server itself, per user.
func startCluster(ctx context.Context, dir string) (*testenv.Environment, string, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, "", err
	}
	auditLog := filepath.Join(dir, "audit.log")
	if err := os.MkdirAll(filepath.Join(dir, "cluster"), 0o700); err != nil {
		return nil, "", err
	}
	env, err := testenv.Start(ctx, testenv.Options{
		Mode: testenv.Full, Nodes: 4, Dir: filepath.Join(dir, "cluster"),
		APIServerArgs: map[string]string{
			"audit-policy-file": policy, "audit-log-path": auditLog,
			"audit-log-format": "json", "audit-log-maxsize": "2000",
			// Blocking: every request is in the log before the benchmark reads it.
			"audit-log-mode": "blocking",
			// envtest turns profiling off; the benchmark profiles the server.
			"profiling": "true",
		},
	})
	return env, auditLog, err
}

// kubeconfigFor writes a kubeconfig with cfg's client certificate, so the
// API server's audit log and RBAC see its user.
func kubeconfigFor(cfg *rest.Config, path string) error {
	c := clientcmdapi.NewConfig()
	c.Clusters["bench"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	c.AuthInfos["bench"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	c.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: "bench"}
	c.CurrentContext = "bench"
	return clientcmd.WriteToFile(*c, path)
}

// auditEntry is the part of an audit event the benchmark reads.
type auditEntry struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
	StageTimestamp           time.Time `json:"stageTimestamp"`
}

// apiCounts counts a user's requests in [from, to) by "verb resource".
func apiCounts(auditLog, user string, from, to time.Time) (map[string]int, error) {
	f, err := os.Open(auditLog)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	counts := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e auditEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.User.Username != user {
			continue
		}
		if e.StageTimestamp.Before(from) || !e.StageTimestamp.Before(to) || e.ObjectRef == nil {
			continue
		}
		res := e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			res += "/" + e.ObjectRef.Subresource
		}
		counts[e.Verb+" "+res]++
	}
	return counts, sc.Err()
}

func isWrite(key string) bool {
	verb, _, _ := strings.Cut(key, " ")
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

func writes(counts map[string]int) int {
	n := 0
	for k, v := range counts {
		if isWrite(k) {
			n += v
		}
	}
	return n
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || m[keys[i]] == m[keys[j]] && keys[i] < keys[j] })
	return keys
}

// process is a child the benchmark measures.
type process struct {
	cmd  *exec.Cmd
	name string
	done chan struct{} // closed when it has exited
}

// start starts p's command tied to the benchmark: a benchmark interrupted
// or killed takes its children with it, where an orphaned controller went
// on reconciling against a dead API server and took a fifth of a core
// from the next run.
func (p *process) start() error {
	p.done = make(chan struct{})
	if err := simcluster.StartTied(p.cmd, func(error) { close(p.done) }); err != nil {
		return fmt.Errorf("starting %s: %w", p.name, err)
	}
	return nil
}

func startProcess(name string, logPath string, bin string, args ...string) (*process, error) {
	p := &process{name: name, cmd: exec.Command(bin, args...)}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	if err := p.start(); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *process) stop() {
	if p == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// memory reads a process's current and peak resident set, in KiB.
func memory(pid int) (rss, peak int64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "VmRSS:":
			rss = v
		case "VmHWM:":
			peak = v
		}
	}
	return rss, peak
}

// cpuSeconds is a process's user+system CPU time so far.
func cpuSeconds(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the parenthesised command name; utime and stime are the
	// 14th and 15th fields of the whole line.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndex(s, ")")+2:])
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100 // USER_HZ
}

// readAudit reads every audited request that completed at or after from.
func readAudit(auditLog string, from time.Time) ([]apiRecord, error) {
	f, err := os.Open(auditLog)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	type entry struct {
		Verb string `json:"verb"`
		User struct {
			Username string `json:"username"`
		} `json:"user"`
		ObjectRef *struct {
			Resource, Subresource, Namespace, Name string
		} `json:"objectRef"`
		RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
		StageTimestamp           time.Time `json:"stageTimestamp"`
	}
	var out []apiRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.ObjectRef == nil || e.StageTimestamp.Before(from) {
			continue
		}
		out = append(out, apiRecord{User: e.User.Username, Verb: e.Verb, Resource: e.ObjectRef.Resource,
			Subresource: e.ObjectRef.Subresource, Namespace: e.ObjectRef.Namespace, Name: e.ObjectRef.Name,
			Received: e.RequestReceivedTimestamp, Done: e.StageTimestamp})
	}
	return out, sc.Err()
}
