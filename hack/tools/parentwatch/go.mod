// Module parentwatch is shared by the control-plane tool modules.
module github.com/userland-dev/userland/hack/tools/parentwatch

go 1.26.0
