package k8s

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestImageBuildsEveryBinary: the Dockerfile and the offline build name
// every binary of the repository (cmd/kgstream and each services/*/cmd/*),
// the Dockerfile copies the go.mod of every workspace module it builds, and
// every service with a Deployment is one of those binaries.
func TestImageBuildsEveryBinary(t *testing.T) {
	root := filepath.Join("..", "..")
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	dockerfile, offline, work := read("Dockerfile"), read("deploy/image/build-offline.sh"), read("go.work")
	cmds, err := filepath.Glob(filepath.Join(root, "services", "*", "cmd", "*"))
	if err != nil || len(cmds) == 0 {
		t.Fatalf("no service binaries found: %v", err)
	}
	pkgs := []string{"./cmd/kgstream"}
	for _, c := range cmds {
		rel, _ := filepath.Rel(root, c)
		pkgs = append(pkgs, "./"+filepath.ToSlash(rel))
	}
	for _, p := range pkgs {
		for name, text := range map[string]string{"Dockerfile": dockerfile, "build-offline.sh": offline} {
			if !regexp.MustCompile(regexp.QuoteMeta(p) + `\s`).MatchString(text) {
				t.Errorf("%s does not build %s", name, p)
			}
		}
	}
	for _, s := range services {
		if !strings.Contains(dockerfile, "./services/"+s+"/cmd/"+s) {
			t.Errorf("the image lacks the binary of the %s Deployment", s)
		}
	}
	// Every module of the workspace but this one has its go.mod copied
	// before go mod download.
	for _, m := range regexp.MustCompile(`(?m)^\s+\./(\S+)$`).FindAllStringSubmatch(work, -1) {
		if m[1] == "deploy/k8s" {
			if !strings.Contains(dockerfile, "-dropuse=./deploy/k8s") {
				t.Error("the Dockerfile keeps deploy/k8s in the workspace without copying it")
			}
			continue
		}
		if !strings.Contains(dockerfile, "COPY "+m[1]+"/go.mod "+m[1]+"/go.sum "+m[1]+"/") {
			t.Errorf("the Dockerfile does not copy the go.mod and go.sum of module %s", m[1])
		}
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "USER 65532:65532", "chown 65532:65532 /data"} {
		if !strings.Contains(dockerfile, want) {
			t.Errorf("the Dockerfile lacks %q", want)
		}
	}
	if !strings.Contains(offline, "CGO_ENABLED=0") || !strings.Contains(offline, "-trimpath") {
		t.Error("the offline build is not static and trimmed")
	}
}
