//go:build tools

// The two commands hack/k8s/build.sh builds; importing them keeps `go mod tidy` from
// dropping the requirement.
package tools

import (
	_ "github.com/cert-manager/cert-manager/cmd/cainjector"
	_ "github.com/cert-manager/cert-manager/cmd/controller"
)
