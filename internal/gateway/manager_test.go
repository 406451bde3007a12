package gateway

import (
	"encoding/base64"
	"strings"
	"testing"
)

func TestParseSessionKeys(t *testing.T) {
	t.Parallel()
	k1 := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("a", 64)))
	k2 := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("b", 64)))
	keys, err := ParseSessionKeys("# newest first\n" + k1 + "\n\n" + k2 + "\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || string(keys[0].Hash) != strings.Repeat("a", 32) || string(keys[1].Block) != strings.Repeat("b", 32) {
		t.Errorf("keys parsed wrongly: %d", len(keys))
	}
	for _, bad := range []string{"", "# only a comment", "not base64!", base64.StdEncoding.EncodeToString([]byte("short"))} {
		if _, err := ParseSessionKeys(bad); err == nil {
			t.Errorf("ParseSessionKeys(%q) succeeded", bad)
		}
	}
}
