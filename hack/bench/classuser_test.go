package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// fakeGateway answers a student's sequence as the gateway does: the
// signed-out environment host sends the browser to the main host's form,
// the form's post hands the browser back with a cookie of its own, and
// the environment answers with progress pages until it is "Ready".
func fakeGateway(t *testing.T, progress int, final int) (addr string, port string) {
	t.Helper()
	var pages atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := strings.Cut(r.Host, ":")
		_, p, _ := strings.Cut(r.Host, ":")
		main := "http://main.test:" + p
		switch {
		case host == "main.test" && r.URL.Path == "/login" && r.Method == http.MethodGet:
			_, _ = w.Write([]byte("<form>"))
		case host == "main.test" && r.URL.Path == "/login":
			if r.FormValue("username") != "s001" || r.FormValue("password") != "pw" || r.FormValue("rd") != "/handoff" {
				http.Error(w, "bad form", http.StatusBadRequest)
				return
			}
			http.Redirect(w, r, "http://env.apps.test:"+p+"/redeem", http.StatusSeeOther)
		case host == "env.apps.test" && r.URL.Path == "/redeem":
			http.SetCookie(w, &http.Cookie{Name: "env", Value: "1", Path: "/"})
			http.Redirect(w, r, "/", http.StatusSeeOther)
		case host == "env.apps.test":
			if ck, err := r.Cookie("env"); err != nil || ck.Value != "1" {
				http.Redirect(w, r, main+"/login?rd=/handoff", http.StatusFound)
				return
			}
			switch r.URL.Path {
			case "/ws":
				c, err := websocket.Accept(w, r, nil)
				if err != nil {
					return
				}
				_ = c.Write(r.Context(), websocket.MessageText, []byte("hello s001"))
				_ = c.Close(websocket.StatusNormalClosure, "")
			case "/small":
				_, _ = w.Write([]byte("x"))
			default:
				if int(pages.Add(1)) <= progress {
					w.WriteHeader(http.StatusAccepted)
					_, _ = w.Write([]byte(`<meta http-equiv="refresh" content="0">`))
					return
				}
				w.WriteHeader(final)
			}
		default:
			http.NotFound(w, r)
		}
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	addr = strings.TrimPrefix(srv.URL, "http://")
	_, port, _ = net.SplitHostPort(addr)
	return addr, port
}

func TestStudentVisitFollowsTheBrowsersSequence(t *testing.T) {
	tests := map[string]struct {
		progress, final int
		wantPages       int
		wantError       string
	}{
		"ready at once":             {progress: 0, final: http.StatusOK},
		"two progress pages":        {progress: 2, final: http.StatusOK, wantPages: 2},
		"an error after the pages":  {progress: 1, final: http.StatusBadGateway, wantPages: 1, wantError: "502"},
		"an error instead of pages": {progress: 0, final: http.StatusNotFound, wantError: "404"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			addr, port := fakeGateway(t, tc.progress, tc.final)
			st := student{gwAddr: addr, mainHost: "main.test:" + port, envHost: "env.apps.test:" + port,
				user: "s001", password: "pw", deadline: 10 * time.Second}
			run := st.visit(context.Background())
			if run.ProgressPages != tc.wantPages {
				t.Errorf("%d progress pages, want %d", run.ProgressPages, tc.wantPages)
			}
			if run.SignIn.IsZero() {
				t.Fatalf("never signed in: %v", run.Errors)
			}
			if tc.wantError == "" {
				if len(run.Errors) > 0 || run.FirstByte.Before(run.SignIn) {
					t.Errorf("errors %v, first byte %v after sign-in %v", run.Errors, run.FirstByte, run.SignIn)
				}
				return
			}
			if !run.FirstByte.IsZero() || len(run.Errors) != 1 || !strings.Contains(run.Errors[0], tc.wantError) {
				t.Errorf("first byte %v, errors %v; want none and one naming %s", run.FirstByte, run.Errors, tc.wantError)
			}
		})
	}
}
