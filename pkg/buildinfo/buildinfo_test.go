package buildinfo_test

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/buildinfo"
)

func TestFromReadsVersionAndVCS(t *testing.T) {
	tests := []struct {
		name string
		bi   debug.BuildInfo
		want buildinfo.Info
		str  string
	}{
		{"workspace build", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			buildinfo.Info{Version: "devel", GoVersion: "go1.26.8"}, "devel go1.26.8"},
		{"tagged with vcs", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-12-01T00:00:00Z"}, {Key: "vcs.modified", Value: "true"}}},
			buildinfo.Info{Version: "v1.2.3", Revision: "abc123", Time: "2026-12-01T00:00:00Z", Modified: true, GoVersion: "go1.26.8"},
			"v1.2.3 abc123+modified 2026-12-01T00:00:00Z go1.26.8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := buildinfo.From(&tt.bi)
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.str, got.String())
		})
	}
}

func TestRegisterExportsBuildInfo(t *testing.T) {
	reg := prometheus.NewRegistry()
	require.NoError(t, buildinfo.Register(reg, "gateway"))
	b := buildinfo.Read()
	want := `
# HELP kgstream_build_info The running build: always 1, the build in its labels.
# TYPE kgstream_build_info gauge
kgstream_build_info{binary="gateway",go_version="` + b.GoVersion + `",revision="` + b.Revision + `",version="` + b.Version + `"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "kgstream_build_info"))
	require.Error(t, buildinfo.Register(reg, "gateway"), "a second registration is refused")
}
