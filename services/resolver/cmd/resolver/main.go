// Command resolver applies extracted documents to the graph store as its own process.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"

	"github.com/kgstream/kgstream/pkg/daemon"
	"github.com/kgstream/kgstream/services/resolver"
)

func main() {
	f := daemon.Flags{Name: "resolver"}
	fs := flag.NewFlagSet("resolver", flag.ExitOnError)
	f.Register(fs, "127.0.0.1:8083")
	maxDeliver := fs.Int("max-deliver", 5, "deliveries before an event is dead-lettered")
	_ = fs.Parse(os.Args[1:])
	err := daemon.Run(f, true, func(_ context.Context, env *daemon.Env) (func(context.Context) error, http.Handler, error) {
		w, err := resolver.New(resolver.Config{MaxDeliver: *maxDeliver}, env.Bus, env.Stores, env.Log, env.Registry)
		if err != nil {
			return nil, nil, err
		}
		return w.Run, nil, nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "resolver:", err)
		os.Exit(1)
	}
}
