package main

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

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
// name. A key that is not a flag is an error naming it and its line. A flag
// given on the command line, or whose environment variable is set, keeps
// that value: flags win over the environment, which wins over the file.
func applyConfigFile(fs *pflag.FlagSet, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading config file: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("parsing config file %s: %w", path, err)
	}
	if doc.Kind == 0 {
		return nil // empty file
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("config file %s: line %d: the top level must be a mapping of flag names to values", path, root.Line)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		f := fs.Lookup(k.Value)
		if f == nil || notInConfig(k.Value) {
			return fmt.Errorf("config file %s: line %d: unknown key %q (keys are the flags of kgstream up; see --help)", path, k.Line, k.Value)
		}
		if seen[k.Value] {
			return fmt.Errorf("config file %s: line %d: key %q given twice", path, k.Line, k.Value)
		}
		seen[k.Value] = true
		if f.Changed {
			continue
		}
		if env := f.Annotations[envAnnotation]; len(env) == 1 && os.Getenv(env[0]) != "" {
			continue
		}
		t := f.Value.Type()
		values, err := daemon.ConfigValues(path, k, v, t == "stringArray" || t == "stringSlice")
		if err != nil {
			return err
		}
		for _, s := range values {
			if err := f.Value.Set(s); err != nil {
				return fmt.Errorf("config file %s: line %d: %s: %w", path, v.Line, k.Value, err)
			}
		}
	}
	return nil
}
