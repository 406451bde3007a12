package realnode

import (
	"encoding/json"
	"fmt"
	"os"
)

// AppImage is one entry of the manifest hack/build-app-images.sh prints:
// a local build of a sample's app, and the public images it stands in for.
type AppImage struct {
	Ref      string   `json:"ref"`
	Archive  string   `json:"archive"`
	Replaces []string `json:"replaces"`
}

// ReadAppImages reads that manifest: the archives to import into the
// node's containerd, and the image overrides (public reference → local
// reference) to apply to the sample templates, which keep their public
// names.
func ReadAppImages(path string) (archives []string, overrides map[string]string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var imgs []AppImage
	if err := json.Unmarshal(data, &imgs); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	overrides = map[string]string{}
	for _, img := range imgs {
		archives = append(archives, img.Archive)
		for _, r := range img.Replaces {
			overrides[r] = img.Ref
		}
	}
	return archives, overrides, nil
}
