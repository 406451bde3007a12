package idle

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/wsframe"
)

// vscode is the VS Code sample template's preset, as shipped.
var vscode = samplePreset("template-vscode.yaml")

func samplePreset(file string) *v1alpha1.IdleSpec {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", file))
	if err != nil {
		panic(err)
	}
	var t v1alpha1.Template
	if err := yaml.UnmarshalStrict(data, &t); err != nil {
		panic(fmt.Sprintf("%s: %v", file, err))
	}
	return t.Spec.Idle
}

var jupyter = &v1alpha1.IdleSpec{Activity: &v1alpha1.ActivitySpec{
	IgnorePaths: []string{"/api/kernels", "/api/sessions", "/api/status"},
}}

func TestRequestCounts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		spec         *v1alpha1.IdleSpec
		method, path string
		want         bool
	}{
		{"no rules: a poll counts", nil, "GET", "/api/kernels", true},
		{"a page counts", jupyter, "GET", "/notebooks/a.ipynb", true},
		{"a background read does not", jupyter, "GET", "/api/kernels?1700000000", false},
		{"nor its WebSocket open", jupyter, "GET", "/api/kernels/abc/channels", false},
		{"HEAD is a read", jupyter, "HEAD", "/api/status", false},
		{"a write to an ignored path counts", jupyter, "POST", "/api/sessions", true},
		{"prefixes are literal", jupyter, "GET", "/API/kernels", true},
	}
	for _, tt := range tests {
		if got := Compile(tt.spec).RequestCounts(tt.method, tt.path); got != tt.want {
			t.Errorf("%s: %s %s counts = %v, want %v", tt.name, tt.method, tt.path, got, tt.want)
		}
	}
}

// vscodeMessage is a VS Code protocol message: a 13-byte header (type, id,
// ack, length) and its body.
func vscodeMessage(kind byte, body string) wsframe.Message {
	b := append([]byte{kind, 0, 0, 0, 7, 0, 0, 0, 6, 0, 0, 0, byte(len(body))}, body...)
	return wsframe.Message{Opcode: wsframe.OpBinary, Length: int64(len(b)), Prefix: b}
}

func TestMessageCounts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		spec *v1alpha1.IdleSpec
		msg  wsframe.Message
		want bool
	}{
		{"ping never counts", nil, wsframe.Message{Opcode: wsframe.OpPing}, false},
		{"pong never counts", vscode, wsframe.Message{Opcode: wsframe.OpPong, Length: 4}, false},
		{"close never counts", nil, wsframe.Message{Opcode: wsframe.OpClose}, false},
		{"no rules: any data message counts", nil, wsframe.Message{Opcode: wsframe.OpText, Length: 1}, true},
		{"VS Code keepalive (13 bytes) does not", vscode, vscodeMessage(9, ""), false},
		{"VS Code latency probe does not", vscode, vscodeMessage(1, "\x04\x06d\x06\x05\x01\x1bremoteextensionsenvironment\x01\x04ping\x00"), false},
		// Recorded from code-server 4.99.4 when its tab lost focus.
		{"VS Code window focus event does not", vscode, wsframe.Message{Opcode: wsframe.OpBinary, Length: 55,
			Prefix: []byte("\x01\x00\x00\x02d\x00\x00\x01\x98\x00\x00\x00*\x01\x00\x00\x00Ef\x18$onDidChangeWindowActive\x00\x00\x00\a[false]")}, false},
		{"VS Code relaying a file changed on disk does not", vscode, wsframe.Message{Opcode: wsframe.OpBinary, Length: 291,
			Prefix: []byte("\x01\x00\x00\x02\xb3\x00\x00\x026\x00\x00\x01\x16\x01\x00\x00\x00\x94W\f$onFileEvent\x00\x00\x00\xff[{\"created\":[],\"changed\":[{\"$mid\":1}]}]")}, false},
		{"VS Code typing counts", vscode, wsframe.Message{Opcode: wsframe.OpBinary, Length: 1216,
			Prefix: []byte("\x01\x00\x00\x03\xc0\x00\x00\x03e\x00\x00\x02\x83\x01\x00\x00\x01\x17P\x13$acceptModelChanged\x00\x00\x02e[{\"$mid\":1}]")}, true},
		{"VS Code terminal input counts", vscode, vscodeMessage(1, "\x04\x06d\x06\x09\x01\x0eremoteterminal\x01\x0binput ls\r"), true},
		{"compressed: judged by kind alone", vscode, wsframe.Message{Opcode: wsframe.OpBinary, Length: 3, Compressed: true}, true},
	}
	for _, tt := range tests {
		if got := Compile(tt.spec).MessageCounts(tt.msg); got != tt.want {
			t.Errorf("%s: counts = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestValidateNamesTheBadExpression(t *testing.T) {
	t.Parallel()
	spec := &v1alpha1.IdleSpec{Activity: &v1alpha1.ActivitySpec{WebSocket: &v1alpha1.WebSocketActivitySpec{
		IgnoreMessages: []string{"ok", "(unclosed"},
	}}}
	errs := Validate(spec, field.NewPath("spec", "idle"))
	var got []string
	for _, e := range errs {
		got = append(got, e.Field)
	}
	if diff := cmp.Diff([]string{"spec.idle.activity.webSocket.ignoreMessages[1]"}, got); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
	// What compiles still applies.
	if Compile(spec).MessageCounts(wsframe.Message{Opcode: wsframe.OpText, Length: 2, Prefix: []byte("ok")}) {
		t.Error("the valid expression was dropped with the invalid one")
	}
}

func TestCacheCompilesOncePerSpec(t *testing.T) {
	t.Parallel()
	var c Cache
	first, again := c.Get(vscode), c.Get(vscode)
	if first != again {
		t.Error("the same spec compiled twice")
	}
	copied := vscode.DeepCopy()
	if c.Get(copied) == c.Get(vscode) {
		t.Error("a new object (a changed template) reused old rules")
	}
	if c.Get(nil) != nil || c.Get(&v1alpha1.IdleSpec{}) != nil {
		t.Error("no activity rules must be the nil default")
	}
}
