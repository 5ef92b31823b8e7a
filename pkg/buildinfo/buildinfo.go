// Package buildinfo tells which build of kgstream is running: the version
// and VCS revision Go stamped into the binary, for `kgstream version`,
// `/v1/status` and the kgstream_build_info metric.
package buildinfo

import (
	"fmt"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Info is one binary's build.
type Info struct {
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	Time      string `json:"time,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"go_version"`
}

// Read returns the running binary's build ("devel" when Go stamped no
// module version, as for builds inside the workspace).
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: "devel"}
	}
	return From(bi)
}

// From reads an Info out of Go's build information.
func From(bi *debug.BuildInfo) Info {
	b := Info{Version: "devel", GoVersion: bi.GoVersion}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		b.Version = v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// String is the one-line form: version, revision (+modified), time, Go.
func (b Info) String() string {
	s := b.Version
	if b.Revision != "" {
		s += " " + b.Revision
		if b.Modified {
			s += "+modified"
		}
	}
	if b.Time != "" {
		s += " " + b.Time
	}
	if b.GoVersion != "" {
		s += " " + b.GoVersion
	}
	return s
}

// Register adds kgstream_build_info{binary,version,revision,go_version} = 1
// to reg, so dashboards can tell which build each process runs.
func Register(reg prometheus.Registerer, binary string) error {
	b := Read()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kgstream_build_info",
		Help: "The running build: always 1, the build in its labels.",
	}, []string{"binary", "version", "revision", "go_version"})
	g.WithLabelValues(binary, b.Version, b.Revision, b.GoVersion).Set(1)
	if err := reg.Register(g); err != nil {
		return fmt.Errorf("registering kgstream_build_info: %w", err)
	}
	return nil
}
