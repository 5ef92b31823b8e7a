// Package catalog reads a Backstage software catalog (catalog-info.yaml,
// multi-document YAML) into the structured relations kgstream imports
// without extraction: typed entities and owned_by, depends_on, part_of, ...
// edges.
//
// Entity types: Component with spec.type service -> service, any other
// Component -> component; Group with spec.type team -> team, any other Group
// -> group; System, Resource, API, Domain and User map to their lower-case
// kind. Relations:
//
//	spec.owner          -> owned_by      (ref kind defaults to Group)
//	spec.dependsOn      -> depends_on    (ref kind required, see below)
//	spec.system         -> part_of       (ref kind defaults to System)
//	System spec.domain  -> part_of       (ref kind defaults to Domain)
//	spec.subcomponentOf -> part_of       (ref kind defaults to Component)
//	spec.subdomainOf    -> part_of       (ref kind defaults to Domain)
//	spec.providesApis   -> provides_api  (ref kind defaults to API)
//	spec.consumesApis   -> consumes_api  (ref kind defaults to API)
//	Group spec.parent   -> child_of      (ref kind defaults to Group)
//	User spec.memberOf  -> member_of     (ref kind defaults to Group)
//
// References are Backstage entity refs: "[kind:][namespace/]name". The
// namespace is not part of kgstream's entity ids (a key is the normalised
// name), so "group:default/payments" and "payments" are the same owner.
//
// A reference to an entity the file defines takes that entity's type (a
// Group defined with spec.type department is a group). A reference to an
// entity the file does not define is emitted as an entity of its own, named
// by the reference; its type follows from the ref kind, and for a Group it
// follows from the field: an owner or a memberOf target is a team (in
// Backstage practice owners and user memberships are teams, and the
// postmortems and the LLM call them teams, so the ids meet), a parent is a
// group (parents are departments and organisations). A kindless dependsOn
// reference resolves to the entity of that name the file defines, if there
// is exactly one; otherwise it is skipped and reported, since Backstage
// itself rejects it.
package catalog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/kgstream/kgstream/pkg/errkind"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/resolve"
)

// ErrInvalidCatalog wraps every parse failure: malformed YAML, a document
// that is not a mapping, an entity without kind or metadata.name, or an
// entity defined twice.
var ErrInvalidCatalog = errkind.New(errkind.Invalid, "invalid catalog")

// Relation names the catalog produces.
const (
	RelOwnedBy     = "owned_by"
	RelDependsOn   = "depends_on"
	RelPartOf      = "part_of"
	RelProvidesAPI = "provides_api"
	RelConsumesAPI = "consumes_api"
	RelChildOf     = "child_of"
	RelMemberOf    = "member_of"
)

// Skipped is something Parse left out without failing: a document of a kind
// it does not map, or a reference it cannot resolve.
type Skipped struct {
	// Index is the 0-based position of the YAML document in the file.
	Index  int
	Kind   string
	Name   string
	Reason string
}

// String formats s for logs and import reports.
func (s Skipped) String() string {
	return fmt.Sprintf("document %d (%s %q): %s", s.Index, s.Kind, s.Name, s.Reason)
}

type metadata struct {
	Name        string `yaml:"name"`
	Namespace   string `yaml:"namespace"`
	Title       string `yaml:"title"`
	Description string `yaml:"description"`
}

type spec struct {
	Type           string   `yaml:"type"`
	Owner          string   `yaml:"owner"`
	DependsOn      []string `yaml:"dependsOn"`
	System         string   `yaml:"system"`
	Domain         string   `yaml:"domain"`
	SubcomponentOf string   `yaml:"subcomponentOf"`
	SubdomainOf    string   `yaml:"subdomainOf"`
	ProvidesAPIs   []string `yaml:"providesApis"`
	ConsumesAPIs   []string `yaml:"consumesApis"`
	Parent         string   `yaml:"parent"`
	MemberOf       []string `yaml:"memberOf"`
}

type document struct {
	APIVersion string   `yaml:"apiVersion"`
	Kind       string   `yaml:"kind"`
	Metadata   metadata `yaml:"metadata"`
	Spec       spec     `yaml:"spec"`
}

type defined struct {
	index int
	name  string // metadata.name
	typ   string
}

// entityType maps a Backstage kind (and its spec.type) to a kgstream entity
// type; "" means the kind is not mapped.
func entityType(kind, specType string) string {
	switch strings.ToLower(kind) {
	case "component":
		if strings.EqualFold(specType, "service") {
			return "service"
		}
		return "component"
	case "group":
		if strings.EqualFold(specType, "team") {
			return "team"
		}
		return "group"
	case "system":
		return "system"
	case "resource":
		return "resource"
	case "api":
		return "api"
	case "domain":
		return "domain"
	case "user":
		return "user"
	}
	return ""
}

// Parse reads a multi-document Backstage catalog. It returns the entities
// and relationships, and the documents and references it skipped. Empty
// documents are ignored.
func Parse(data []byte) (*events.Structured, []Skipped, error) {
	docs, err := decodeAll(data)
	if err != nil {
		return nil, nil, err
	}
	var skipped []Skipped
	out := &events.Structured{Entities: []events.RawEntity{}, Relationships: []events.RawRelationship{}}

	// First pass: the entities the file defines, so that references resolve
	// to their real types whatever the document order.
	defs := map[string]defined{}     // lower-case kind + "\x00" + key -> definition
	byName := map[string][]defined{} // key -> definitions (for kindless refs)
	emitted := map[string]bool{}     // resolve.ID of every emitted entity
	for i, d := range docs {
		if d == nil {
			continue
		}
		typ := entityType(d.Kind, d.Spec.Type)
		if typ == "" {
			skipped = append(skipped, Skipped{Index: i, Kind: d.Kind, Name: d.Metadata.Name, Reason: "unsupported kind"})
			continue
		}
		key := resolve.Key(d.Metadata.Name)
		dk := strings.ToLower(d.Kind) + "\x00" + key
		if prev, ok := defs[dk]; ok {
			return nil, nil, fmt.Errorf("%w: document %d: %s %q is already defined by document %d",
				ErrInvalidCatalog, i, d.Kind, d.Metadata.Name, prev.index)
		}
		def := defined{index: i, name: d.Metadata.Name, typ: typ}
		defs[dk] = def
		byName[key] = append(byName[key], def)

		e := events.RawEntity{Name: d.Metadata.Name, Type: typ, Key: d.Metadata.Name,
			Description: strings.TrimSpace(d.Metadata.Description), Authority: events.AuthorityCatalogName}
		if t := strings.TrimSpace(d.Metadata.Title); t != "" {
			e.Name, e.Authority = t, events.AuthorityCatalogTitle
		}
		out.Entities = append(out.Entities, e)
		emitted[resolve.ID(typ, d.Metadata.Name)] = true
	}

	// Second pass: relationships.
	seenRel := map[string]bool{}
	for i, d := range docs {
		if d == nil || entityType(d.Kind, d.Spec.Type) == "" {
			continue
		}
		src := d.Metadata.Name
		srcType := entityType(d.Kind, d.Spec.Type)
		kind := strings.ToLower(d.Kind)
		add := func(rel, ref, defaultKind, undefinedGroupType string) {
			ref = strings.TrimSpace(ref)
			if ref == "" {
				return
			}
			name, typ, ok := resolveRef(ref, defaultKind, undefinedGroupType, defs, byName)
			if !ok {
				skipped = append(skipped, Skipped{Index: i, Kind: d.Kind, Name: src,
					Reason: fmt.Sprintf("%s reference %q: %s", rel, ref, typ)})
				return
			}
			id := resolve.ID(typ, name)
			if !emitted[id] {
				emitted[id] = true
				out.Entities = append(out.Entities, events.RawEntity{Name: name, Type: typ, Key: name,
					Authority: events.AuthorityCatalogName})
			}
			rk := resolve.ID(srcType, src) + "|" + rel + "|" + id
			if seenRel[rk] {
				return
			}
			seenRel[rk] = true
			out.Relationships = append(out.Relationships, events.RawRelationship{
				Source: src, SourceType: srcType, Relation: rel, Target: name, TargetType: typ,
				Description: fmt.Sprintf("%s %s %s (service catalog)", src, strings.ReplaceAll(rel, "_", " "), name),
				Strength:    1,
			})
		}
		s := d.Spec
		add(RelOwnedBy, s.Owner, "group", "team")
		for _, r := range s.DependsOn {
			add(RelDependsOn, r, "", "team")
		}
		add(RelPartOf, s.System, "system", "team")
		if kind == "system" {
			add(RelPartOf, s.Domain, "domain", "team")
		}
		add(RelPartOf, s.SubcomponentOf, "component", "team")
		add(RelPartOf, s.SubdomainOf, "domain", "team")
		for _, r := range s.ProvidesAPIs {
			add(RelProvidesAPI, r, "api", "team")
		}
		for _, r := range s.ConsumesAPIs {
			add(RelConsumesAPI, r, "api", "team")
		}
		if kind == "group" {
			add(RelChildOf, s.Parent, "group", "group")
		}
		if kind == "user" {
			for _, r := range s.MemberOf {
				add(RelMemberOf, r, "group", "team")
			}
		}
	}
	return out, skipped, nil
}

// resolveRef turns an entity ref into (name, type). On failure ok is false
// and typ holds the reason.
func resolveRef(ref, defaultKind, undefinedGroupType string, defs map[string]defined, byName map[string][]defined) (name, typ string, ok bool) {
	kind, rest, hasKind := strings.Cut(ref, ":")
	if !hasKind {
		kind, rest = "", ref
	}
	if i := strings.LastIndexByte(rest, '/'); i >= 0 {
		rest = rest[i+1:]
	}
	name = strings.TrimSpace(rest)
	if name == "" {
		return "", "empty name", false
	}
	key := resolve.Key(name)
	kind = strings.ToLower(strings.TrimSpace(kind))
	if kind == "" {
		kind = defaultKind
	}
	if kind == "" {
		// Kindless where Backstage requires a kind: accept it only when the
		// file leaves no doubt.
		if c := byName[key]; len(c) == 1 {
			return c[0].name, c[0].typ, true
		}
		return "", "a kind is required (e.g. component:" + name + ")", false
	}
	if d, ok := defs[kind+"\x00"+key]; ok {
		return d.name, d.typ, true
	}
	switch kind {
	case "group":
		return name, undefinedGroupType, true
	case "component":
		// Without its spec.type an undefined component is just a component.
		return name, "component", true
	}
	if t := entityType(kind, ""); t != "" {
		return name, t, true
	}
	return "", "unsupported kind " + kind, false
}

// decodeAll splits the file into documents; a nil entry is an empty
// document.
func decodeAll(data []byte) ([]*document, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*document
	for i := 0; ; i++ {
		var node yaml.Node
		err := dec.Decode(&node)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: document %d: %w", ErrInvalidCatalog, i, err)
		}
		body := &node
		if body.Kind == yaml.DocumentNode && len(body.Content) > 0 {
			body = body.Content[0]
		}
		if body.Kind == 0 || body.Kind == yaml.DocumentNode || (body.Kind == yaml.ScalarNode && body.Tag == "!!null") {
			docs = append(docs, nil)
			continue
		}
		if body.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%w: document %d (line %d): want a mapping, got a %s",
				ErrInvalidCatalog, i, body.Line, nodeKind(body.Kind))
		}
		var d document
		if err := body.Decode(&d); err != nil {
			return nil, fmt.Errorf("%w: document %d (line %d): %w", ErrInvalidCatalog, i, body.Line, err)
		}
		d.Kind = strings.TrimSpace(d.Kind)
		d.Metadata.Name = strings.TrimSpace(d.Metadata.Name)
		if d.Kind == "" {
			return nil, fmt.Errorf("%w: document %d (line %d): kind is missing", ErrInvalidCatalog, i, body.Line)
		}
		if d.Metadata.Name == "" {
			return nil, fmt.Errorf("%w: document %d (line %d): %s has no metadata.name", ErrInvalidCatalog, i, body.Line, d.Kind)
		}
		docs = append(docs, &d)
	}
}

func nodeKind(k yaml.Kind) string {
	switch k {
	case yaml.SequenceNode:
		return "sequence"
	case yaml.ScalarNode:
		return "scalar"
	case yaml.AliasNode:
		return "alias"
	}
	return fmt.Sprintf("node kind %d", k)
}
