package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/kgstream/kgstream/pkg/daemon"
	"github.com/kgstream/kgstream/pkg/store/embedded"
	vecembedded "github.com/kgstream/kgstream/pkg/vector/embedded"
)

// compactResult is one file's line of `kgstream compact`.
type compactResult struct {
	File        string `json:"file"`
	BytesBefore int64  `json:"bytes_before"`
	BytesAfter  int64  `json:"bytes_after"`
	Values      int    `json:"values,omitempty"`
	Recoded     int    `json:"recoded,omitempty"`
}

func compactCmd(g *globals) *cobra.Command {
	var dataDir string
	c := &cobra.Command{
		Use:   "compact",
		Short: "Rewrite the embedded store and vector index files of a stopped server, smaller",
		Long: "Rewrite the embedded store (" + daemon.StoreFile + ") and vector index (" + daemon.VectorFile + ") of a data\n" +
			"directory: pages filled, the space of edits and deletions returned to the disk (what a deleted\n" +
			"document left in freed pages is not copied), every store value re-encoded as this build writes\n" +
			"it (values an older build wrote uncompressed are compressed). The server must be stopped: a file\n" +
			"another process has open is refused, and a failed run leaves the files as they were.",
		Args: nArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var out []compactResult
			path := filepath.Join(dataDir, daemon.StoreFile)
			if _, err := os.Stat(path); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return &exitError{code: 1, msg: fmt.Sprintf("no store in %s (%s not found; is --data right?)", dataDir, daemon.StoreFile)}
				}
				return err
			}
			st, err := embedded.Compact(cmd.Context(), path)
			if err != nil {
				return err
			}
			out = append(out, compactResult{File: path, BytesBefore: st.BytesBefore, BytesAfter: st.BytesAfter,
				Values: st.Values, Recoded: st.Recoded})
			vpath := filepath.Join(dataDir, daemon.VectorFile)
			if _, err := os.Stat(vpath); err == nil {
				before, after, err := vecembedded.Compact(vpath)
				if err != nil {
					return err
				}
				out = append(out, compactResult{File: vpath, BytesBefore: before, BytesAfter: after})
			}
			if g.json {
				return writeJSON(g.stdout, out)
			}
			for _, r := range out {
				fmt.Fprintf(g.stdout, "%s: %.1f MiB -> %.1f MiB", r.File, mib(r.BytesBefore), mib(r.BytesAfter))
				if r.Values > 0 {
					fmt.Fprintf(g.stdout, " (%d values, %d re-encoded)", r.Values, r.Recoded)
				}
				fmt.Fprintln(g.stdout)
			}
			return nil
		},
	}
	envString(c.Flags(), &dataDir, "data", "KG_DATA_DIR", "./data", "data directory of the stopped server")
	return c
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
