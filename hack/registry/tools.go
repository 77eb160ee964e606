//go:build tools

// crane, the registry client hack/k8s/build.sh builds from the same module as the
// registry (`make publish` pushes with it); importing it keeps `go mod tidy` from
// dropping what it needs.
package main

import (
	_ "github.com/google/go-containerregistry/cmd/crane"
)
