# kubectl-crdver. The two commands a newcomer needs:
#   make install   build and install kubectl-crdver (and crdver-engine, beside it), then run it on a bundled example (no cluster);
#                  it ends with the export PATH=… line when the install folder is not on your PATH
#   make test      build the test control plane if needed (cached), then run every test

GO          ?= go
# make install's output is what the README shows, also when make runs inside another make
MAKEFLAGS   += --no-print-directory
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT      ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS     := -s -w -X github.com/crdver/kubectl-crdver/internal/buildinfo.Version=$(VERSION) -X github.com/crdver/kubectl-crdver/internal/buildinfo.Commit=$(COMMIT)
GOBIN       ?= $(shell $(GO) env GOBIN)
ifeq ($(GOBIN),)
GOBIN       := $(shell $(GO) env GOPATH)/bin
endif
TEST_BINARIES := kube-apiserver etcd kube-controller-manager
# The older Kubernetes minor whose real kube-apiserver `make test` checks kubectl-crdver's
# --kube-version answers against, besides the current one (internal/versiondiff.CIOlderMinor);
# `make test-versions` checks every minor of hack/tools/kube-1.*.
CI_KUBE_MINOR := 1.34
# The minor whose kube-apiserver and kube-controller-manager `make test` runs the cluster engine
# against where the StorageVersionMigration does not trim status.storedVersions and crdver
# must (migrate/clusterengine's TestKube135ClusterEngine).
SVM_KUBE_MINOR := 1.35

.PHONY: install build docs docs-transcripts test test-assets test-versions test-svm-minors bench clean

## install: install kubectl-crdver and crdver-engine, the executable it runs for every command but
## `versions --sort` and `version` (and kubectl_complete-crdver for shell completion) into GOBIN,
## then run `kubectl crdver versions` on the bundled CronTab example, the way your shell will
## (the binary directly when kubectl or GOBIN is not on your PATH). It says first what it builds
## and how long it takes, and ends, when GOBIN is not on your PATH, with the line that puts it there.
install:
	@echo "Building kubectl-crdver and crdver-engine (the kubectl plugin and the engine it runs) into $(GOBIN)."
	@echo "The first build compiles the Kubernetes API server libraries it links: about 6 minutes on 2 idle cores"
	@echo "(15 on a busy machine); later builds take seconds."
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(GOBIN)/ ./cmd/kubectl-crdver ./cmd/crdver-engine
	ln -sf kubectl-crdver $(GOBIN)/kubectl_complete-crdver
	@onpath=no; case ":$$PATH:" in *":$(GOBIN):"*) onpath=yes;; esac; \
	if [ $$onpath = yes ] && command -v kubectl >/dev/null 2>&1; then \
		echo; echo '$$ kubectl crdver versions -f testdata/crds/crontab.yaml'; \
		kubectl crdver versions -f testdata/crds/crontab.yaml; \
	else \
		echo; echo '$$ $(GOBIN)/kubectl-crdver versions -f testdata/crds/crontab.yaml'; \
		$(GOBIN)/kubectl-crdver versions -f testdata/crds/crontab.yaml; \
	fi; \
	echo; \
	if ! command -v kubectl >/dev/null 2>&1; then \
		echo "kubectl is not on your PATH: install it to run the plugin as kubectl crdver (or run $(GOBIN)/kubectl-crdver directly)."; \
	fi; \
	if [ $$onpath = yes ]; then \
		echo "Installed: kubectl crdver is ready."; \
	else \
		echo "Installed, but $(GOBIN) is not on your PATH, so kubectl does not find the plugin yet"; \
		echo "(kubectl crdver: unknown command \"crdver\"). Run this, and add it to your shell's profile (~/.bashrc, ~/.zshrc):"; \
		echo 'export PATH="$(GOBIN):$$PATH"'; \
	fi

## build: build bin/kubectl-crdver and bin/crdver-engine (keep them in the same folder)
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/ ./cmd/kubectl-crdver ./cmd/crdver-engine

## docs: regenerate what the docs and the front executable take from the commands: the CLI
## reference docs/reference/*.md (cobra's generator; hack/docgen's TestReferenceIsCurrent fails
## when it is stale), the --help texts kubectl-crdver answers by itself
## (cmd/kubectl-crdver/help_texts.go; TestFrontHelpIsCurrent), and every console example of
## README.md and docs/ from a real run (docs' TestExamples, which fails when one is stale): the
## offline ones, and the sessions against a test API server (one for the whole run, built like
## make test's; the kube-apiserver of $(CI_KUBE_MINOR) for the examples that show an older server)
## or with the test conversion webhook. The man pages and completion scripts are
## generated at release time (.goreleaser.yaml: hack/docgen -release-files).
## It also rewrites the transcript in docs/commands/upgrade.md from the e2e test that checks it
## (TRANSCRIPTS_E2E, ~50 s); the fleet's transcripts take ~5 min more: make docs-transcripts.
docs:
	$(GO) run ./hack/docgen -out docs/reference
	$(GO) run ./hack/docgen -front-help cmd/kubectl-crdver/help_texts.go
	@hack/build-test-binaries.sh $(TEST_BINARIES) >/dev/null
	@hack/build-test-binaries.sh --kube $(CI_KUBE_MINOR) kube-apiserver etcd >/dev/null
	KUBEBUILDER_ASSETS="$$(hack/build-test-binaries.sh $(TEST_BINARIES))" CRDVER_UPDATE_DOCS=1 $(GO) test -count=1 -run '^TestExamples$$' ./docs/
	KUBEBUILDER_ASSETS="$$(hack/build-test-binaries.sh $(TEST_BINARIES))" $(GO) test -count=1 -run '^TestExamples$$' ./docs/
	KUBEBUILDER_ASSETS="$$(hack/build-test-binaries.sh $(TEST_BINARIES))" CRDVER_UPDATE_DOCS=1 $(GO) test -count=1 -run '$(TRANSCRIPTS_E2E)' ./e2e/

# The tests whose transcripts the pages show (markers <!-- example: transcript PKG TEST … -->),
# by package; each rewrites its blocks with CRDVER_UPDATE_DOCS=1 and checks what it wrote.
TRANSCRIPTS_E2E   := ^TestPathNeedsIntermediateRelease$$
TRANSCRIPTS_FLEET := ^(TestFleetPlanAgreesWithSingleRuns|TestFleetUpgradeInWaves)$$

## docs-transcripts: rewrite every console example that is the transcript of a test (the blocks
## marked <!-- example: transcript PKG TEST … -->: docs/commands/upgrade.md's, which make docs
## also rewrites, and docs/commands/fleet.md's five) from the tests that check them in make test:
## e2e's TRANSCRIPTS_E2E (~50 s) and e2e/fleet's TRANSCRIPTS_FLEET (~5 min: four API servers of
## two minors, and a plan that waits for a conversion webhook that does not answer). Kept out of
## make docs for those 5 minutes; run it when a change alters what fleet commands print.
docs-transcripts:
	@hack/build-test-binaries.sh $(TEST_BINARIES) >/dev/null
	@hack/build-test-binaries.sh --kube $(CI_KUBE_MINOR) kube-apiserver etcd >/dev/null
	KUBEBUILDER_ASSETS="$$(hack/build-test-binaries.sh $(TEST_BINARIES))" CRDVER_UPDATE_DOCS=1 $(GO) test -count=1 -run '$(TRANSCRIPTS_E2E)' ./e2e/
	KUBEBUILDER_ASSETS="$$(hack/build-test-binaries.sh $(TEST_BINARIES))" CRDVER_UPDATE_DOCS=1 $(GO) test -count=1 -run '$(TRANSCRIPTS_FLEET)' ./e2e/fleet/

## test-assets: build kube-apiserver, etcd, kube-controller-manager and agnhost (the e2e conversion webhook) from the Go module proxy (cached),
## the kube-apiserver of $(CI_KUBE_MINOR), the kube-apiserver and kube-controller-manager of $(SVM_KUBE_MINOR)
## (~10 min each on 2 cores, the first time only), and the real conversion webhooks of Cluster API (hack/tools/capi-webhook)
## and cert-manager (hack/tools/cm-webhook/versions)
test-assets:
	@hack/build-test-binaries.sh $(TEST_BINARIES) >/dev/null
	@hack/build-test-binaries.sh agnhost >/dev/null
	@hack/build-test-binaries.sh --kube $(CI_KUBE_MINOR) kube-apiserver etcd >/dev/null
	@hack/build-test-binaries.sh --kube $(SVM_KUBE_MINOR) kube-apiserver etcd kube-controller-manager >/dev/null
	@hack/build-webhook.sh capi >/dev/null
	@hack/build-webhook.sh cert-manager >/dev/null
	@hack/build-webhook.sh helm >/dev/null

## test: every test, unit and integration (real kube-apiserver + etcd; the version differential
## test against the current minor and $(CI_KUBE_MINOR); the cluster engine on $(SVM_KUBE_MINOR))
## A test that needs the binaries of $(CI_KUBE_MINOR) or $(SVM_KUBE_MINOR) fails here when they are
## missing (CRDVER_TEST_REQUIRED_MINORS), where `go test` alone skips it.
## The tests run with XDG_CACHE_HOME in a temporary folder, removed after: envtest keeps a file
## per port it reserves in <cache>/kubebuilder-envtest, read once when a test binary starts, so
## only the environment can move it. Go's build cache and the test binaries stay where they are.
## The test binaries are linked without DWARF and symbol table (-ldflags='-s -w'; panics still
## name functions and lines): linking the 35 of them took 170 s of 2 cores, 92 s so.
## The packages that run the built plugin share one build of it (CRDVER_TEST_PLUGIN_CACHE,
## internal/testenv.BuildPlugin): five links of both executables became one.
test: test-assets
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && set -x && \
	GOCACHE="$$($(GO) env GOCACHE)" CRDVER_TESTBIN="$${XDG_CACHE_HOME:-$$HOME/.cache}/kubectl-crdver/testbin" \
	KUBEBUILDER_ASSETS="$$(hack/build-test-binaries.sh $(TEST_BINARIES))" CRDVER_KUBE_MINORS=current,$(CI_KUBE_MINOR) \
	CRDVER_TEST_REQUIRED_MINORS=$(CI_KUBE_MINOR),$(SVM_KUBE_MINOR) CRDVER_TEST_PLUGIN_CACHE="$$tmp/plugin" XDG_CACHE_HOME="$$tmp" $(GO) test -count=1 -ldflags='-s -w' -timeout 45m ./...

## test-versions: the version differential test against every supported minor's real
## kube-apiserver (builds the missing ones one at a time: ~10 min each on 2 cores, the first
## time only); the agreement table goes to bin/kube-versions-agreement.md
test-versions: test-assets
	@for m in $$(hack/build-test-binaries.sh --minors); do hack/build-test-binaries.sh --kube $$m kube-apiserver etcd >/dev/null || exit 1; done
	@mkdir -p bin
	KUBEBUILDER_ASSETS="$$(hack/build-test-binaries.sh $(TEST_BINARIES))" CRDVER_KUBE_MINORS=all CRDVER_AGREEMENT_OUT=$(CURDIR)/bin/kube-versions-agreement.md \
		$(GO) test -count=1 -timeout 90m -run TestAgreementWithAPIServers -v ./internal/versiondiff/

## test-svm-minors: the cluster engine's tests on each minor whose StorageVersionMigration is
## beta and off by default: $(SVM_KUBE_MINOR) (its controller never trims status.storedVersions:
## crdver does) and 1.36 (its controller trims), building 1.36's kube-apiserver and
## kube-controller-manager first (~30 min on 2 cores, the first time only; make test runs the
## 1.36 case only where they are built)
test-svm-minors: test-assets
	@hack/build-test-binaries.sh --kube 1.36 kube-apiserver etcd kube-controller-manager >/dev/null
	KUBEBUILDER_ASSETS="$$(hack/build-test-binaries.sh $(TEST_BINARIES))" CRDVER_TEST_REQUIRED_MINORS=$(SVM_KUBE_MINOR),1.36 \
		$(GO) test -count=1 -timeout 30m -run 'TestKube13[56]ClusterEngine' -v ./migrate/clusterengine/

## bench: the performance figures recorded in docs/benchmarks.md
bench: test-assets
	KUBEBUILDER_ASSETS="$$(hack/build-test-binaries.sh $(TEST_BINARIES))" $(GO) test -run '^$$' -bench . -benchtime 20x -timeout 60m ./...

clean:
	rm -rf bin dist .release
