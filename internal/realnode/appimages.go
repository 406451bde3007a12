package realnode

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
// names. An archive named by a relative path is relative to the
// manifest's directory. Entries without a ref or an archive, and a public
// image replaced by two refs, are refused.
func ReadAppImages(path string) (archives []string, overrides map[string]string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var imgs []AppImage
	if err := json.Unmarshal(data, &imgs); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if imgs == nil {
		return nil, nil, fmt.Errorf("%s: not a list of images (hack/build-app-images.sh prints one on its last line)", path)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, nil, err
	}
	overrides = map[string]string{}
	var errs []error
	for i, img := range imgs {
		if img.Ref == "" || img.Archive == "" {
			errs = append(errs, fmt.Errorf("entry %d: needs both a ref and an archive", i))
			continue
		}
		archive := img.Archive
		if !filepath.IsAbs(archive) {
			archive = filepath.Join(dir, archive)
		}
		archives = append(archives, archive)
		for _, r := range img.Replaces {
			if prev, ok := overrides[r]; ok && prev != img.Ref {
				errs = append(errs, fmt.Errorf("entry %d: %s is replaced by both %s and %s", i, r, prev, img.Ref))
				continue
			}
			overrides[r] = img.Ref
		}
	}
	if len(errs) > 0 {
		return nil, nil, fmt.Errorf("%s: %w", path, errors.Join(errs...))
	}
	return archives, overrides, nil
}
