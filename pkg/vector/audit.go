package vector

import (
	"context"
	"fmt"
	"slices"

	"github.com/kgstream/kgstream/pkg/provenance"
)

// maxAuditProblems caps ACLAudit.Problems: the counts tell how bad it is,
// the first few examples tell where to look.
const maxAuditProblems = 20

// ACLAudit compares the ACL copies a tenant's items hold with the
// registry's current ACLs. Each item counts at most once: as an orphan when
// any of its documents is deleted or unknown, else as a mismatch when any
// source's ACL differs from its document's current one.
type ACLAudit struct {
	// Items is the number of items scanned.
	Items int
	// ACLMismatches counts items holding, for a live document, another
	// ACL than the registry's (a lost or not yet applied ACL change).
	ACLMismatches int
	// Orphans counts items built from a document the registry has deleted
	// or never recorded.
	Orphans int
	// Stale counts items, orphans aside, built from a version of a live
	// document other than the registry's current one: re-indexing still to
	// come, or lost. It is counted apart from ACLMismatches (an item may be
	// both), and only by AuditSources, which knows the versions.
	Stale int
	// Problems describes the first few findings.
	Problems []string
}

func (a *ACLAudit) problem(format string, args ...any) {
	if len(a.Problems) < maxAuditProblems {
		a.Problems = append(a.Problems, fmt.Sprintf(format, args...))
	}
}

// AuditACLs scans every item of tenant in ix and compares it with live,
// the registry's current ACL of each live (announced, not deleted)
// document of the tenant. ACLs are compared in NormalizeACL's form, the
// form the index stores.
func AuditACLs(ctx context.Context, ix Index, tenant string, live map[string]provenance.ACL) (ACLAudit, error) {
	norm := make(map[string]provenance.ACL, len(live))
	for doc, acl := range live {
		norm[doc] = NormalizeACL(acl)
	}
	return audit(ctx, ix, tenant, norm, nil, nil)
}

// AuditSources is AuditACLs against the registry's states of the tenant's
// documents (deleted ones included, as ListSources gives them), also
// counting the items built from a version the registry no longer has
// (Stale).
func AuditSources(ctx context.Context, ix Index, tenant string, srcs []provenance.SourceState) (ACLAudit, error) {
	return AuditSourcesConfirmed(ctx, ix, tenant, srcs, nil)
}

// Recheck reads the registry's current states of docIDs (absent: unknown).
type Recheck func(ctx context.Context, docIDs []string) (map[string]provenance.SourceState, error)

// AuditSourcesConfirmed is AuditSources with every finding confirmed by
// recheck, read after the scan: srcs is listed before the scan, so while
// documents keep arriving an item built from a document registered, re-
// permissioned or edited after the listing would be a finding the
// registry no longer backs. Only the items that are still findings
// against the states read afterwards count. recheck nil confirms nothing.
func AuditSourcesConfirmed(ctx context.Context, ix Index, tenant string, srcs []provenance.SourceState, recheck Recheck) (ACLAudit, error) {
	live, versions := statesMaps(srcs)
	var flagged []ItemSources
	a, err := audit(ctx, ix, tenant, live, versions, func(it ItemSources) { flagged = append(flagged, it) })
	if err != nil || recheck == nil || len(flagged) == 0 {
		return a, err
	}
	var ids []string
	for _, it := range flagged {
		for _, s := range it.Sources {
			ids = append(ids, s.DocID)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	fresh, err := recheck(ctx, ids)
	if err != nil {
		return a, fmt.Errorf("reading the registry again for %d documents: %w", len(ids), err)
	}
	for _, id := range ids {
		delete(live, id)
		delete(versions, id)
		if s, ok := fresh[id]; ok && !s.Deleted {
			live[id], versions[id] = NormalizeACL(s.ACL), s.Version
		}
	}
	confirmed := ACLAudit{Items: a.Items}
	for _, it := range flagged {
		confirmed.check(it, live, versions)
	}
	return confirmed, nil
}

// statesMaps gives the live documents' normalized ACLs and versions.
func statesMaps(srcs []provenance.SourceState) (map[string]provenance.ACL, map[string]int64) {
	live := make(map[string]provenance.ACL, len(srcs))
	versions := make(map[string]int64, len(srcs))
	for _, s := range srcs {
		if !s.Deleted {
			live[s.DocID], versions[s.DocID] = NormalizeACL(s.ACL), s.Version
		}
	}
	return live, versions
}

// audit scans the tenant's items against live (normalized ACLs); versions,
// when not nil, are the live documents' current versions. flag, when not
// nil, is given every item that is a finding.
func audit(ctx context.Context, ix Index, tenant string, live map[string]provenance.ACL, versions map[string]int64, flag func(ItemSources)) (ACLAudit, error) {
	var a ACLAudit
	err := ix.ScanSources(ctx, tenant, "", func(it ItemSources) error {
		a.Items++
		if a.check(it, live, versions) && flag != nil {
			flag(it)
		}
		return nil
	})
	if err != nil {
		return a, fmt.Errorf("scanning the vector items of %q: %w", tenant, err)
	}
	return a, nil
}

// check classifies one item (see ACLAudit) and reports whether it is a
// finding.
func (a *ACLAudit) check(it ItemSources, live map[string]provenance.ACL, versions map[string]int64) bool {
	for _, s := range it.Sources {
		if _, ok := live[s.DocID]; !ok {
			a.Orphans++
			a.problem("%s %q: built from %q, which the registry has deleted or does not know", it.Kind, it.ID, s.DocID)
			return true
		}
	}
	found := false
	for _, s := range it.Sources {
		if cur, ok := versions[s.DocID]; ok && s.Version != cur {
			a.Stale++
			a.problem("%s %q: built from version %d of %q, the registry's is %d", it.Kind, it.ID, s.Version, s.DocID, cur)
			found = true
			break
		}
	}
	for _, s := range it.Sources {
		if want := live[s.DocID]; !NormalizeACL(s.ACL).Equal(want) {
			a.ACLMismatches++
			a.problem("%s %q: holds an ACL of %q other than the registry's", it.Kind, it.ID, s.DocID)
			return true
		}
	}
	return found
}
