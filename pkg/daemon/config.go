package daemon

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"gopkg.in/yaml.v3"
)

// Parse parses a service's command line into fs, then sets the flags the
// YAML config file named by --config (or KG_CONFIG) holds: a mapping of
// flag names to values (a list for a repeatable flag). A flag given on the
// command line, or whose environment variable is set (EnvOf), keeps that
// value: flags win over the environment, which wins over the file. An
// unknown key is an error naming it and its line.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	cf := fs.Lookup("config")
	if cf == nil || cf.Value.String() == "" {
		return nil
	}
	return ApplyConfigFile(fs, cf.Value.String())
}

// EnvOf is the environment variable of a service flag: KG_ and the name in
// upper case with '_' for '-' (KG_REDIS_PREFIX), except where the variable
// says more (KG_DATA_DIR, KG_HTTP_ADDR, KG_NATS_URL, KG_REDIS_URL,
// KG_TOKENS_FILE, KG_WEBHOOKS_FILE, KG_ALIASES_FILE).
func EnvOf(flagName string) string {
	switch flagName {
	case "data":
		return "KG_DATA_DIR"
	case "http":
		return "KG_HTTP_ADDR"
	case "nats":
		return "KG_NATS_URL"
	case "redis":
		return "KG_REDIS_URL"
	case "tokens", "webhooks", "aliases":
		return "KG_" + strings.ToUpper(flagName) + "_FILE"
	}
	return "KG_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// ApplyConfigFile sets the flags of fs from the YAML file at path, as Parse
// describes.
func ApplyConfigFile(fs *flag.FlagSet, path string) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	return ApplyConfig(path, "the flags of "+fs.Name()+"; see -help", func(name string) (ConfigFlag, bool) {
		f := fs.Lookup(name)
		if f == nil || name == "config" {
			return ConfigFlag{}, false
		}
		return ConfigFlag{
			Keep: given[name] || os.Getenv(EnvOf(name)) != "",
			// The flag package's own values hold one value; a list is for
			// a repeatable flag a service defines itself.
			List: !strings.HasPrefix(fmt.Sprintf("%T", f.Value), "*flag."),
			Set:  func(v string) error { return fs.Set(name, v) },
		}, true
	})
}

// ConfigFlag is a flag as a config file sees it.
type ConfigFlag struct {
	// Keep: the flag was given on the command line or its environment
	// variable is set, so the file leaves it alone.
	Keep bool
	// List: the flag is repeatable and the file may give a list.
	List bool
	// Set sets one value (called once per list item).
	Set func(string) error
}

// ApplyConfig is the one reader of kgstream's config files, for the
// services' flag sets and for kgstream up's: it sets flags from the YAML
// mapping of flag names to values in the file at path. lookup returns the
// flag of a key, false for a key that is no flag the file may set, an
// error naming the key, its line and keys (what the valid keys are).
func ApplyConfig(path, keys string, lookup func(name string) (ConfigFlag, bool)) error {
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
		f, ok := lookup(k.Value)
		if !ok {
			return fmt.Errorf("config file %s: line %d: unknown key %q (keys are %s)", path, k.Line, k.Value, keys)
		}
		if seen[k.Value] {
			return fmt.Errorf("config file %s: line %d: key %q given twice", path, k.Line, k.Value)
		}
		seen[k.Value] = true
		if f.Keep {
			continue
		}
		values, err := configValues(path, k, v, f.List)
		if err != nil {
			return err
		}
		for _, s := range values {
			if err := f.Set(s); err != nil {
				return fmt.Errorf("config file %s: line %d: %s: %w", path, v.Line, k.Value, err)
			}
		}
	}
	return nil
}

// configValues reads the value of key k in config file path: one plain
// value, or, where list allows it (a repeatable flag), a list of plain
// values. Errors name the file, the line and the key.
func configValues(path string, k, v *yaml.Node, list bool) ([]string, error) {
	switch v.Kind {
	case yaml.ScalarNode:
		return []string{v.Value}, nil
	case yaml.SequenceNode:
		if !list {
			return nil, fmt.Errorf("config file %s: line %d: %s takes one value, not a list", path, v.Line, k.Value)
		}
		values := make([]string, 0, len(v.Content))
		for _, item := range v.Content {
			if item.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("config file %s: line %d: %s: list items must be plain values", path, item.Line, k.Value)
			}
			values = append(values, item.Value)
		}
		return values, nil
	default:
		return nil, fmt.Errorf("config file %s: line %d: %s: want a value or a list of values", path, v.Line, k.Value)
	}
}
