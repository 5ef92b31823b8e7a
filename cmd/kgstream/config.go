package main

import (
	"os"

	"github.com/spf13/pflag"

	"github.com/kgstream/kgstream/pkg/daemon"
)

// notInConfig reports flags a server's config file has no business
// setting: the file itself, and the client-side globals.
func notInConfig(name string) bool {
	switch name {
	case "config", "help", "server", "token", "json":
		return true
	}
	return false
}

// applyConfigFile sets the flags of fs from a YAML mapping keyed by flag
// name (daemon.ApplyConfig). A key that is not a flag is an error naming it
// and its line. A flag given on the command line, or whose environment
// variable is set, keeps that value: flags win over the environment, which
// wins over the file.
func applyConfigFile(fs *pflag.FlagSet, path string) error {
	return daemon.ApplyConfig(path, "the flags of kgstream up; see --help", func(name string) (daemon.ConfigFlag, bool) {
		f := fs.Lookup(name)
		if f == nil || notInConfig(name) {
			return daemon.ConfigFlag{}, false
		}
		env := f.Annotations[envAnnotation]
		t := f.Value.Type()
		return daemon.ConfigFlag{
			Keep: f.Changed || (len(env) == 1 && os.Getenv(env[0]) != ""),
			List: t == "stringArray" || t == "stringSlice",
			Set:  f.Value.Set,
		}, true
	})
}
