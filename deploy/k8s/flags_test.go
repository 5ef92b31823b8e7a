package k8s

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestManifestArgsAreFlagsOfTheirBinaries builds the six service binaries
// and checks every --flag the Deployments pass against the flags the
// binary itself lists in its -h output, so a renamed or misspelt flag (a
// pod that would exit at start) fails here.
func TestManifestArgsAreFlagsOfTheirBinaries(t *testing.T) {
	r := render(t, "base")
	bin := t.TempDir()
	args := []string{"build", "-o", bin + string(filepath.Separator)}
	for _, s := range services {
		args = append(args, "./services/"+s+"/cmd/"+s)
	}
	build := exec.Command("go", args...)
	build.Dir = filepath.Join("..", "..")
	// This module is tested with GOWORK=off; the services build in the
	// repository's workspace.
	work, err := filepath.Abs(filepath.Join(build.Dir, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	build.Env = append(os.Environ(), "GOWORK="+work)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the services: %v\n%s", err, out)
	}
	flagLine := regexp.MustCompile(`(?m)^\s+-([a-z0-9-]+)`)
	for _, s := range services {
		out, err := exec.Command(filepath.Join(bin, s), "-h").CombinedOutput()
		if err != nil {
			t.Fatalf("%s -h: %v\n%s", s, err, out)
		}
		known := map[string]bool{}
		for _, m := range flagLine.FindAllStringSubmatch(string(out), -1) {
			known[m[1]] = true
		}
		if !known["nats"] || !known["http"] {
			t.Fatalf("%s -h lists no common flags; output:\n%s", s, out)
		}
		for _, a := range r.deployments[s].Spec.Template.Spec.Containers[0].Args {
			name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if !strings.HasPrefix(a, "--") || !strings.Contains(a, "=") {
				t.Errorf("%s: argument %q is not --flag=value", s, a)
				continue
			}
			if !known[name] {
				t.Errorf("%s: flag --%s is not one of the binary's flags", s, name)
			}
		}
	}
}
