package identity

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDisplayAndCookieForm: pages show the name people know, and the
// identity keeps its short field names in the session cookie, so a
// cookie written before this package existed still reads the same.
func TestDisplayAndCookieForm(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		id      Identity
		display string
		cookie  string
	}{
		"an OIDC user":   {Identity{User: "alice@uni.example", Email: "alice@uni.example", Groups: []string{"cs101"}}, "alice@uni.example", `{"u":"alice@uni.example","e":"alice@uni.example","g":["cs101"]}`},
		"a GitHub login": {Identity{User: "github:583231", Name: "octocat"}, "octocat", `{"u":"github:583231","n":"octocat"}`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b, err := json.Marshal(tc.id)
			if err != nil {
				t.Fatal(err)
			}
			got := struct{ Display, Cookie string }{tc.id.Display(), string(b)}
			want := struct{ Display, Cookie string }{tc.display, tc.cookie}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
