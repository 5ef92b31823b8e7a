package main

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/spf13/cobra"
)

func reclusterCmd(g *globals) *cobra.Command {
	var full bool
	c := &cobra.Command{
		Use:   "recluster [--full]",
		Short: "Re-cluster the token's tenant now (--full: from scratch, as the first run) instead of at the next graph change",
		Long: "Re-cluster the token's tenant now. Without --full the run is the one the next graph change\n" +
			"would cause: incremental from the previous partition (or from scratch when due by the\n" +
			"schedule, --cluster-full-every and --cluster-full-interval of up). With --full it starts from\n" +
			"scratch: the partition Microsoft GraphRAG computes on the same graph, and the reports of every\n" +
			"community whose member set it changes are written again. The request is queued and the command\n" +
			"returns at once; for admin tokens only.",
		Args: nArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			body, _ := json.Marshal(map[string]bool{"full": full})
			var out struct {
				Tenant    string `json:"tenant"`
				RequestID string `json:"request_id"`
				Full      bool   `json:"full"`
				Queued    bool   `json:"queued"`
			}
			if err := g.client().Do(cmd.Context(), http.MethodPost, "/v1/communities/recluster", "application/json", body, &out); err != nil {
				return serverError(g, err)
			}
			if g.json {
				return writeJSON(g.stdout, out)
			}
			mode := "incremental unless due from scratch"
			if out.Full {
				mode = "from scratch"
			}
			fmt.Fprintf(g.stdout, "re-clustering of %s requested (%s), request %s\n", out.Tenant, mode, out.RequestID)
			if out.Queued {
				fmt.Fprintln(g.stdout, "the event stream did not take it yet: the server keeps it and publishes it when it does")
			}
			return nil
		},
	}
	c.Flags().BoolVar(&full, "full", false, "re-cluster from scratch")
	return c
}
