// Command image writes Userland's container image as an OCI archive without
// a container engine (`make image`).
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/userland-dev/userland/internal/image"
)

func main() {
	var opts image.Options
	var out, ref string
	flag.StringVar(&opts.Binary, "binary", "", "static userland binary")
	flag.StringVar(&opts.Version, "version", "dev", "version label")
	flag.StringVar(&opts.Revision, "revision", "", "commit label")
	flag.StringVar(&opts.Arch, "arch", "amd64", "image architecture")
	flag.StringVar(&ref, "ref", "ghcr.io/userland-dev/userland:dev", "reference recorded in the archive")
	flag.StringVar(&out, "out", "bin/userland-image.tar", "output OCI archive")
	flag.Parse()
	// The commit time would be more reproducible; the epoch keeps
	// rebuilds of the same binary byte-identical.
	opts.Created = time.Unix(0, 0).UTC()
	img, err := image.Build(opts)
	if err == nil {
		err = image.WriteOCIArchive(img, ref, out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	digest, _ := img.Digest()
	fmt.Printf("%s: %s (%s)\n", out, ref, digest)
}
