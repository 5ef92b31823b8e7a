# kgstream: `make run` serves the demo, `make test` runs every test.
GO        ?= go
MODULES   := github.com/kgstream/kgstream/...
DATA      ?= ./data
STATICCHECK_VERSION := v0.8.2

.PHONY: run build test test-short lint bench tidy clean ui

## run: the embedded all-in-one (NATS JetStream, stores, every worker) with the demo corpus
run:
	$(GO) run ./cmd/kgstream up --data $(DATA) --demo

## build: every binary into ./bin
build:
	mkdir -p bin
	$(GO) build -o bin/ ./cmd/kgstream ./services/gateway/cmd/gateway ./services/extractor/cmd/extractor \
		./services/resolver/cmd/resolver ./services/clusterer/cmd/clusterer ./services/reporter/cmd/reporter \
		./services/query/cmd/query

# pkg/leiden is single-goroutine numeric code: the race detector finds
# nothing there and makes its fixture tests ten times slower.
SEQUENTIAL := github.com/kgstream/kgstream/pkg/leiden

## test: every module, with the race detector, against real NATS JetStream and Redis,
## unit and integration tests (-tags integration: those read ../shared beside the checkout)
test:
	$(GO) test -tags integration -race -count=1 -timeout 45m $$($(GO) list $(MODULES) | grep -v -x -F '$(SEQUENTIAL)')
	$(GO) test -tags integration -count=1 -timeout 10m $(SEQUENTIAL)
	cd deploy/k8s && GOWORK=off $(GO) test -tags integration -count=1 -timeout 10m ./...

## test-short: the unit tests only (no integration tag, no ../shared needed), without the race detector
test-short:
	$(GO) test -count=1 $(MODULES)

## lint: gofmt, go vet, staticcheck (with the integration tag, so helpers only
## integration tests use are seen used, and those tests are checked too)
lint:
	@out=$$(gofmt -l pkg services cmd); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet -tags integration $(MODULES)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) -tags integration $(MODULES)

## bench: the figures the issues ask for (needs Redis, NATS and Weaviate up: .ci/run starts them)
BENCH = $(GO) test -tags integration -run '^$$' -timeout 60m
bench:
	$(BENCH) -bench 'Ingest|IndexLag' -benchtime 1x ./cmd/kgstream/app/
	KG_SCALE_DOCS=$${KG_SCALE_DOCS:-10000} $(BENCH) -v -bench BenchmarkScale -benchtime 1x ./cmd/kgstream/app/
	KG_SCALE_STORE=redis KG_SCALE_DOCS=$${KG_SCALE_DOCS:-10000} $(BENCH) -v -bench BenchmarkScale -benchtime 1x ./cmd/kgstream/app/
	$(BENCH) -bench . -benchtime 1x -benchmem ./pkg/leiden/
	$(BENCH) -bench BenchmarkOfflineExtraction -benchtime 5x ./services/extractor/offline/
	$(BENCH) -bench BenchmarkChunk -benchtime 5x ./services/extractor/chunk/
	$(BENCH) -bench BenchmarkHubChanged -benchmem ./pkg/store/embedded/
	$(BENCH) -bench 'BenchmarkExtractionCatalogSize|BenchmarkCatalogGazetteerRefresh' -benchtime 5x ./services/extractor/offline/
	$(BENCH) -bench 'Global|Basic' -benchtime 1x ./services/query/
	$(BENCH) -bench BenchmarkLocalRanking -benchtime 20x -benchmem ./services/query/
	KG_QUERY_SCALE_DOCS=$${KG_QUERY_SCALE_DOCS:-10000} $(BENCH) -v -bench BenchmarkQueryScale -benchtime 1x ./cmd/kgstream/app/
	KG_QUERY_SCALE_DOCS=$${KG_QUERY_SCALE_DOCS:-10000} KG_QUERY_CHURN_MODES=$${KG_QUERY_CHURN_MODES:-paths,aggregate,global,status,local,basic} $(BENCH) -v -bench BenchmarkQueryChurn -benchtime 1x ./cmd/kgstream/app/
	$(BENCH) -bench Regenerate -benchtime 3x ./services/reporter/
	$(BENCH) -bench BenchmarkLLMReports -benchtime 3x ./services/reporter/
	cd pkg && $(BENCH) -bench Search -benchtime 1000x ./vector/embedded/ ./vector/weaviate/
	cd pkg && $(BENCH) -bench BenchmarkApply -benchtime 300x ./store/embedded/ ./store/redis/
	cd pkg && $(BENCH) -bench BenchmarkReplaceCommunities -benchtime 10x ./store/embedded/
	$(BENCH) -bench BenchmarkRepublish -benchtime 3x ./services/gateway/
	$(BENCH) -bench BenchmarkReclusterAfterEdit -benchtime 20x ./services/clusterer/
	$(BENCH) -bench BenchmarkGraphOf -benchtime 40x ./services/clusterer/

## ui: rebuild the web UI bundle (services/query/webui/dist, committed) from web/
ui:
	cd web && npm ci --no-audit --no-fund && npm run build

## tidy: go mod tidy in every module
tidy:
	for m in pkg services/gateway services/extractor services/resolver services/clusterer services/reporter services/query cmd/kgstream deploy/k8s; do \
		(cd $$m && GOWORK=off $(GO) mod tidy) || exit 1; done

clean:
	rm -rf bin $(DATA)
