// The sandbox ("pause") image's one binary for the local test node (hack/testenv/node/build.sh). Not product code.
module joinguard.io/hack/testenv/node/pause

go 1.26.0
