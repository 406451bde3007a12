package realnode

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAdversaryAppImagesManifestIsChecked: --app-images takes a manifest
// whose archives are imported (as root) and whose refs replace the
// samples' images. A manifest that is not what hack/build-app-images.sh
// prints must be refused with a clear error (invariant 7) rather than
// surface later as an obscure ctr failure, or as an image silently
// replaced by an empty or ambiguous ref; and an archive named relative to
// the manifest must be found wherever dev mode is started from.
func TestAdversaryAppImagesManifestIsChecked(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		manifest     string
		wantErr      bool
		wantArchives []string // relative to the manifest's directory
	}{
		{name: "the script's output", manifest: `[{"ref":"userland.local/jupyter:1","archive":"jupyter.tar","replaces":["quay.io/jupyter/base-notebook:latest"]}]`,
			wantArchives: []string{"jupyter.tar"}},
		{name: "no archive", manifest: `[{"ref":"userland.local/jupyter:1","replaces":["quay.io/jupyter/base-notebook:latest"]}]`, wantErr: true},
		{name: "no ref", manifest: `[{"archive":"jupyter.tar","replaces":["quay.io/jupyter/base-notebook:latest"]}]`, wantErr: true},
		{name: "archive that ctr would read as a flag", manifest: `[{"ref":"userland.local/x:1","archive":"--all-platforms","replaces":["x"]}]`,
			wantArchives: []string{"--all-platforms"}},
		{name: "one public image replaced twice", manifest: `[{"ref":"userland.local/a:1","archive":"a.tar","replaces":["x"]},{"ref":"userland.local/b:1","archive":"b.tar","replaces":["x"]}]`, wantErr: true},
		{name: "not a list", manifest: `null`, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "manifest.json")
			if err := os.WriteFile(path, []byte(tc.manifest), 0o600); err != nil {
				t.Fatal(err)
			}
			archives, _, err := ReadAppImages(path)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error = %v, want error: %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			var want []string
			for _, a := range tc.wantArchives {
				want = append(want, filepath.Join(dir, a))
			}
			if diff := cmp.Diff(want, archives); diff != "" {
				t.Errorf("archives (-want +got):\n%s", diff)
			}
		})
	}
}
