package devenv

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/userland-dev/userland/internal/echo"
)

// DemoApps stands in for environments' pods, which the simulated cluster
// only pretends to run: each environment gets its own small app on a
// loopback port, found through the gateway's resolver interface. The app
// says whose environment it is, shows the identity headers it received and
// echoes WebSocket messages.
type DemoApps struct {
	mu      sync.Mutex
	addrs   map[string]string
	servers []*http.Server
	// apps replace the demo app for an environment (Serve).
	apps map[string]http.Handler
	// routes send environments to real apps' addresses (Route).
	routes map[string]string
	closed bool
}

// Serve answers for one environment with h instead of the demo app, from
// its next connection on: browser tests put a real or hostile app behind
// the gateway this way.
func (d *DemoApps) Serve(namespace, name string, h http.Handler) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.apps == nil {
		d.apps = map[string]http.Handler{}
	}
	d.apps[namespace+"/"+name] = h
}

// Route sends one environment to addr, a real app listening there,
// instead of a demo app: browser tests put Jupyter, phpMyAdmin and VS Code
// behind the gateway this way, with nothing in between.
func (d *DemoApps) Route(namespace, name, addr string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.routes == nil {
		d.routes = map[string]string{}
	}
	d.routes[namespace+"/"+name] = addr
}

// handler is what answers for key now.
func (d *DemoApps) handler(key string) http.Handler {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.apps[key]
}

// Resolve returns the demo app for an environment, starting it on first
// use.
func (d *DemoApps) Resolve(_ context.Context, namespace, name string, _ types.UID, _ int32) (string, error) {
	key := namespace + "/" + name
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return "", errors.New("dev mode is stopping")
	}
	if addr, ok := d.routes[key]; ok {
		return addr, nil
	}
	if addr, ok := d.addrs[key]; ok {
		return addr, nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("starting the demo app for %s: %w", key, err)
	}
	demo := demoHandler(namespace, name)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := d.handler(key); h != nil {
			h.ServeHTTP(w, r)
			return
		}
		demo.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	if d.addrs == nil {
		d.addrs = map[string]string{}
	}
	d.addrs[key] = l.Addr().String()
	d.servers = append(d.servers, srv)
	return d.addrs[key], nil
}

// Close stops every demo app.
func (d *DemoApps) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	for _, s := range d.servers {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = s.Shutdown(ctx)
		cancel()
		_ = s.Close()
	}
}

var demoPage = template.Must(template.New("demo").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Name}} — simulated environment</title>
<style>
body { font: 16px/1.5 system-ui, sans-serif; margin: 0 auto; max-width: 48rem; padding: 1rem; }
.banner { background: #fff8c5; border: 1px solid #d4a72c; border-radius: 8px; padding: .5rem 1rem; }
table { border-collapse: collapse; } td, th { text-align: left; padding: .2rem .6rem; border-bottom: 1px solid #ddd; }
</style></head>
<body>
<p class="banner" role="note"><strong>Simulated environment.</strong> <code>userland dev</code> runs pods on simulated (kwok) nodes, so this built-in demo app answers in place of the template's real image.</p>
<h1 id="owner">Environment {{.Namespace}}/{{.Name}} of {{or .User "nobody"}}</h1>
<h2>Identity headers received</h2>
<table>{{range .Headers}}<tr><th scope="row">{{.Name}}</th><td>{{.Value}}</td></tr>{{end}}</table>
<h2>WebSocket echo</h2>
<form id="echo-form"><label>Message <input id="echo-input" value="hello"></label> <button>Send</button></form>
<p>Connection: <span id="echo-state">connecting…</span></p>
<ul id="echo-log" aria-live="polite"></ul>
<script>
(function () {
  var base = location.pathname.replace(/[^/]*$/, "");
  var ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + base + "ws");
  var log = document.getElementById("echo-log"), input = document.getElementById("echo-input");
  function note(text) { var li = document.createElement("li"); li.textContent = text; log.appendChild(li); }
  ws.onopen = function () { document.getElementById("echo-state").textContent = "open"; ws.send(input.value); };
  ws.onclose = function () { document.getElementById("echo-state").textContent = "closed"; };
  ws.onmessage = function (e) { note(e.data); };
  document.getElementById("echo-form").onsubmit = function (e) { e.preventDefault(); ws.send(input.value); };
})();
</script>
</body></html>
`))

// demoHandler is one environment's demo app.
func demoHandler(namespace, name string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/ws", echo.WebSocket)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		type header struct{ Name, Value string }
		var headers []header
		for k, v := range r.Header {
			if strings.HasPrefix(k, "X-Forwarded-") || strings.HasPrefix(k, "X-Userland-") {
				headers = append(headers, header{k, strings.Join(v, ", ")})
			}
		}
		sort.Slice(headers, func(i, j int) bool { return headers[i].Name < headers[j].Name })
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = demoPage.Execute(w, map[string]any{
			"Namespace": namespace, "Name": name, "User": r.Header.Get("X-Forwarded-User"), "Headers": headers,
		})
	})
	return mux
}
