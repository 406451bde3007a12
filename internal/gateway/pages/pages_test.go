package pages

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestInlineStyleIsAdmittedByItsHash: the browser applies the inline
// stylesheet only if the policy names its exact hash (the browser tests
// check that it does apply).
func TestInlineStyleIsAdmittedByItsHash(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	RenderLogin(rec, http.StatusOK, Login{Return: "/x", Error: "<wrong>"})
	body := rec.Body.String()
	style := regexp.MustCompile(`(?s)<style>(.*?)</style>`).FindStringSubmatch(body)
	if style == nil {
		t.Fatal("no inline stylesheet")
	}
	sum := sha256.Sum256([]byte(style[1]))
	want := "style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, want) || !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("policy %q does not admit the inline stylesheet (%s) or admits more", csp, want)
	}
	if !strings.Contains(body, "&lt;wrong&gt;") || !strings.Contains(body, `role="alert"`) {
		t.Error("the error is not escaped or not announced")
	}
}

func TestErrorIsAPageForBrowsersAndTextForScripts(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		headers map[string]string
		want    string
	}{
		{"navigation", map[string]string{"Sec-Fetch-Mode": "navigate"}, "text/html; charset=utf-8"},
		{"fetch from a page", map[string]string{"Sec-Fetch-Mode": "cors", "Accept": "text/html"}, "text/plain; charset=utf-8"},
		{"old browser", map[string]string{"Accept": "text/html,*/*"}, "text/html; charset=utf-8"},
		{"script", nil, "text/plain; charset=utf-8"},
	}
	var got, want []string
	for _, tc := range cases {
		r := httptest.NewRequest(http.MethodGet, "/nope", nil)
		for k, v := range tc.headers {
			r.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		NotFound(rec, r)
		got = append(got, tc.name+": "+rec.Header().Get("Content-Type"))
		want = append(want, tc.name+": "+tc.want)
		if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "not yours to open") {
			t.Errorf("%s: %d %q", tc.name, rec.Code, rec.Body.String())
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("content types (-want +got):\n%s", diff)
	}
}
