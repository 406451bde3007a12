package docs

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	helmcmd "helm.sh/helm/v4/pkg/cmd"
	"helm.sh/helm/v4/pkg/strvals"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"

	"github.com/userland-dev/userland/internal/chartrender"
	"github.com/userland-dev/userland/internal/controller"
	"github.com/userland-dev/userland/internal/plugin"
)

// external are the commands the docs use that are not the project's, nor
// kubectl's or Helm's: they are run as they are, and what the docs do with
// them is checked where it matters (the user hash, below).
var external = []string{"openssl", "gh", "printf", "sha256sum", "cut", "yq", "tr", "ctr"}

// parses says whether a command tree takes args as a person types them:
// the subcommand exists and runs, every flag is one of its flags with a
// valid value, and the positional arguments are ones it accepts. Nothing
// is run.
func parses(root *cobra.Command, args []string) error {
	cmd, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	if !cmd.Runnable() {
		return fmt.Errorf("%q is not a command that runs", cmd.CommandPath())
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return fmt.Errorf("%s: %w", cmd.CommandPath(), err)
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
		return fmt.Errorf("%s: %w", cmd.CommandPath(), err)
	}
	return nil
}

// unquote removes a shell word's quotes.
func unquote(s string) string {
	var b strings.Builder
	var quote byte
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quote == 0 && (c == '\'' || c == '"'):
			quote = c
		case c == quote:
			quote = 0
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// commandChecker checks the docs' commands against the real command trees
// and the chart, and gathers what the docs install, to check the secrets
// they tell people to create against it.
type commandChecker struct {
	root     string
	userland string // the built userland binary
	targets  []string
	// created and installed are, per docs file, the Secrets it tells
	// people to create and the manifests its install commands give.
	created   map[string][]string
	installed map[string]string
}

func (k *commandChecker) check(c shellCommand, args []string) error {
	// "id=$id kubectl apply -f -": an environment for one command.
	for len(args) > 1 && strings.Contains(args[0], "=") && !strings.HasPrefix(args[0], "-") {
		args = args[1:]
	}
	switch args[0] {
	case "make":
		if len(args) < 2 || !slices.Contains(k.targets, args[1]) {
			return fmt.Errorf("not a Makefile target")
		}
		return nil
	case "kubectl":
		if len(args) > 1 && args[1] == "userland" {
			return parses(plugin.NewCommand(genericiooptions.NewTestIOStreamsDiscard()), args[2:])
		}
		return k.kubectl(c, args[1:])
	case "helm":
		return k.helm(c, args[1:])
	case "userland":
		// The binary itself, with --help: cobra parses the command line
		// (an unknown command or flag fails) and runs nothing.
		out, err := exec.Command(k.userland, append(args[1:], "--help")...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	}
	if name, value, ok := strings.Cut(args[0], "="); ok && len(args) == 1 {
		return k.assignment(name, value)
	}
	if slices.Contains(external, args[0]) {
		return nil
	}
	return fmt.Errorf("a command this test does not know: check it here, or list it as external")
}

func (k *commandChecker) kubectl(c shellCommand, args []string) error {
	root := kubectlcmd.NewDefaultKubectlCommand()
	if err := parses(root, args); err != nil {
		return err
	}
	cmd, rest, _ := root.Find(args)
	_ = cmd.ParseFlags(rest)
	positional := cmd.Flags().Args()
	switch cmd.CommandPath() {
	case "kubectl create secret generic":
		k.created[c.File] = append(k.created[c.File], positional[0])
	case "kubectl apply":
		if dir, _ := cmd.Flags().GetString("kustomize"); dir != "" {
			manifests, err := readTree(filepath.Join(k.root, dir))
			if err != nil {
				return fmt.Errorf("the kustomization the docs apply: %w", err)
			}
			k.installed[c.File] += manifests
		}
	}
	return nil
}

// helmMu: Helm's command tree binds its flags to package-level settings,
// so two trees may not be built or parsed at once.
var helmMu sync.Mutex

func (k *commandChecker) helm(c shellCommand, args []string) error {
	helmMu.Lock()
	defer helmMu.Unlock()
	cmd, err := helmCommand(args)
	if err != nil {
		return err
	}
	if cmd.Name() != "install" {
		return fmt.Errorf("only helm install is checked; check %q here", cmd.CommandPath())
	}
	positional := cmd.Flags().Args()
	values := map[string]any{}
	sets, _ := cmd.Flags().GetStringArray("set")
	for _, s := range sets {
		if err := strvals.ParseInto(unquote(s), values); err != nil {
			return fmt.Errorf("--set %s: %w", s, err)
		}
	}
	namespace, _ := cmd.Flags().GetString("namespace")
	// Rendered as helm install renders it: values.schema.json checks
	// every value, and the templates run.
	manifest, err := chartrender.Render(filepath.Join(k.root, positional[1]), positional[0], namespace, values)
	if err != nil {
		return fmt.Errorf("rendering the chart with the docs' values: %w", err)
	}
	k.installed[c.File] += manifest
	return nil
}

// helmCommand is Helm's command for args, its flags parsed; the caller
// holds helmMu.
func helmCommand(args []string) (*cobra.Command, error) {
	root, err := helmcmd.NewRootCmd(io.Discard, args, func(bool) {})
	if err != nil {
		return nil, err
	}
	if err := parses(root, args); err != nil {
		return nil, err
	}
	cmd, rest, _ := root.Find(args)
	return cmd, cmd.ParseFlags(rest)
}

// assignment checks the docs' shell variables that compute something the
// project computes too: the user hash the controller labels volumes with
// is run as the docs write it, and must equal the controller's.
func (k *commandChecker) assignment(name, value string) error {
	if name != "hash" {
		return nil
	}
	const id = "github:583231"
	cmd := exec.Command("bash", "-c", "id="+id+"; hash="+value+"; printf %s \"$hash\"")
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("running it: %w", err)
	}
	if want := controller.UserHash(id); string(out) != want {
		return fmt.Errorf("gives %q for %s, the controller's label is %q", out, id, want)
	}
	return nil
}

// unusedSecrets are the Secrets a page tells people to create that no
// install command of that page uses.
func (k *commandChecker) unusedSecrets() []string {
	var out []string
	for file, secrets := range k.created {
		for _, s := range secrets {
			if !strings.Contains(k.installed[file], s) {
				out = append(out, fmt.Sprintf("%s: the docs create Secret %q, which no install command of that page uses", file, s))
			}
		}
	}
	slices.Sort(out)
	return out
}

// readTree is every file under dir, concatenated.
func readTree(dir string) (string, error) {
	var b bytes.Buffer
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		content, err := os.ReadFile(path)
		b.Write(content)
		return err
	})
	return b.String(), err
}

// TestDocsShellCommands runs, or parses with the real command trees,
// every command of the docs' `sh` blocks: kubectl's, the plugin's and
// Helm's command trees take them as written, the userland binary takes
// its command lines, helm install renders the chart with the docs' values
// (values.schema.json included), and every Secret the docs tell people to
// create is one that the install beside it uses. A renamed flag, value or
// Secret cannot leave the docs behind.
func TestDocsShellCommands(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	bin := filepath.Join(t.TempDir(), "userland")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/userland").CombinedOutput(); err != nil {
		t.Fatalf("building userland: %v\n%s", err, out)
	}
	k := &commandChecker{root: root, userland: bin, targets: makefileTargets(t, root), created: map[string][]string{}, installed: map[string]string{}}
	commands := docsCommands(t, root)
	checked := 0
	for _, c := range commands {
		for _, args := range alternatives(c.Args) {
			checked++
			if err := k.check(c, args); err != nil {
				t.Errorf("%s: %v", c, err)
			}
		}
	}
	for _, unused := range k.unusedSecrets() {
		t.Error(unused)
	}
	// The binary refuses what it does not know, so the check above is one.
	if err := k.check(shellCommand{}, []string{"userland", "gateway", "--auth-mod=oidc"}); err == nil {
		t.Error("userland gateway --auth-mod=oidc passed the check")
	}
	if checked < 30 {
		t.Fatalf("checked %d commands, want at least 30: the docs' sh blocks are no longer found", checked)
	}
	t.Logf("%d commands from %d lines of the docs' sh blocks checked; Secrets created and used: %v", checked, len(commands), k.created)
}

// TestCheckerRefusesWhatIsWrong: each kind of mistake the docs could make
// is caught, so the test above cannot pass by checking nothing.
func TestCheckerRefusesWhatIsWrong(t *testing.T) {
	t.Parallel()
	checker := func() *commandChecker {
		return &commandChecker{root: filepath.Join("..", ".."), targets: []string{"test"}, created: map[string][]string{}, installed: map[string]string{}}
	}
	c := shellCommand{File: "f.md", Line: 1}
	wrong := map[string][]string{
		"make target":         {"make", "tests"},
		"plugin subcommand":   {"kubectl", "userland", "lists", "-A"},
		"plugin flag":         {"kubectl", "userland", "create", "alice", "--templates", "vscode"},
		"kubectl flag":        {"kubectl", "-n", "x", "create", "secret", "generic", "s", "--from-literals=a=b"},
		"kubectl subcommand":  {"kubectl", "craete", "namespace", "x"},
		"helm flag":           {"helm", "install", "u", "charts/userland", "--sets", "url=x"},
		"helm value":          {"helm", "install", "u", "charts/userland", "--set", "url=https://u.example", "--set", "gateway.auth.mode=ldap"},
		"helm required value": {"helm", "install", "u", "charts/userland"},
		"helm chart":          {"helm", "install", "u", "charts/nothing"},
		"the docs' user hash": {"hash=$(printf %s \"$id\" | sha256sum | cut -c1-16)"},
		"unknown command":     {"curl", "-k", "https://x"},
	}
	for name, args := range wrong {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := checker().check(c, args)
			if err == nil {
				t.Fatalf("%v passed the check", args)
			}
			t.Logf("refused: %v", err)
		})
	}
	k := checker()
	k.created["f.md"] = []string{"userland-session-keys", "userland-oidc"}
	if err := k.check(c, []string{"helm", "install", "u", "charts/userland", "--set", "url=https://u.example"}); err != nil {
		t.Fatal(err)
	}
	want := []string{`f.md: the docs create Secret "userland-oidc", which no install command of that page uses`}
	if diff := cmp.Diff(want, k.unusedSecrets()); diff != "" {
		t.Errorf("unusedSecrets (-want +got):\n%s", diff)
	}
	for _, right := range [][]string{
		{"kubectl", "userland", "stop", "NAME", "-n", "cs101"},
		{"kubectl", "-n", "x", "create", "secret", "generic", "s", "--from-literal=a=b"},
		{"helm", "install", "u", "charts/userland", "-n", "x", "--set", "url=https://u.example"},
		{"id=$id", "kubectl", "apply", "-f", "-"},
		{"hash=$(printf %s \"$id\" | sha256sum | cut -c1-32)"},
	} {
		if err := k.check(c, right); err != nil {
			t.Errorf("%v refused: %v", right, err)
		}
	}
}
