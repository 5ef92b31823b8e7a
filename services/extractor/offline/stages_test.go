package offline_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/taxonomy"
	"github.com/kgstream/kgstream/services/extractor/chunk"
	"github.com/kgstream/kgstream/services/extractor/offline"
)

func extractDoc(t *testing.T, cfg offline.Config, docType, text string) []string {
	t.Helper()
	x, err := offline.New(cfg)
	require.NoError(t, err)
	doc := &events.DocChanged{Header: events.Header{Tenant: "acme"}, DocID: "D-1", Version: 1, DocType: docType, Text: text}
	ents, rels, err := x.Extract(t.Context(), doc, []events.TextUnit{{ID: "u1", Text: text, End: len(text)}})
	require.NoError(t, err)
	for _, e := range ents {
		require.Equal(t, "u1", e.TextUnit)
	}
	for _, r := range rels {
		require.Equal(t, "u1", r.TextUnit)
	}
	return triples(rels)
}

func TestSentences(t *testing.T) {
	text := "First one (e.g. this) ends here. Second? Yes!\nA table | row\n\n  v1.2 is fine.  "
	var got []string
	for _, s := range chunk.Sentences(text) {
		got = append(got, text[s.Start:s.End])
	}
	require.Equal(t, []string{"First one (e.g. this) ends here.", "Second?", "Yes!", "A table | row", "v1.2 is fine."}, got)

	// Sentences may start with a lower-case identifier; abbreviations and
	// initials do not end one.
	text = "The certificate expired. cert-manager could not renew it, etc. and so on. Ask J. smith at approx. 5 pm."
	got = nil
	for _, s := range chunk.Sentences(text) {
		got = append(got, text[s.Start:s.End])
	}
	require.Equal(t, []string{"The certificate expired.", "cert-manager could not renew it, etc. and so on.", "Ask J. smith at approx. 5 pm."}, got)
}

func TestFailureStageRules(t *testing.T) {
	cfg := offline.Config{DisablePatterns: true, DisableMentions: true}
	// Negation: the cue is there, the failure is not.
	require.Empty(t, extractDoc(t, cfg, "incident", "We checked the ingress and no certificate had expired. Latency rose for ten minutes."))
	// One primary mode: the mechanism, not the context.
	require.Equal(t, []string{
		"failure_mode:connection pool exhaustion -is_a-> failure_mode:resource exhaustion",
		"incident:D-1 -failure-> failure_mode:connection pool exhaustion",
	}, extractDoc(t, cfg, "incident", "After a deploy, a retry storm exhausted the connection pool of the orders database."))
	// Unless the text asserts more.
	require.Equal(t, []string{
		"failure_mode:disk full -is_a-> failure_mode:resource exhaustion",
		"failure_mode:dns misconfiguration -is_a-> failure_mode:dns",
		"incident:D-1 -failure-> failure_mode:disk full",
		"incident:D-1 -failure-> failure_mode:dns misconfiguration",
	}, extractDoc(t, cfg, "incident", "Root causes: the log volume was full, and a DNS record change broke lookups."))
	// The cause, not the symptom: a quoted error message is no cause, a
	// root-cause section outweighs the timeline, action items count for
	// nothing.
	require.Equal(t, []string{
		"failure_mode:unstaged config push -is_a-> failure_mode:configuration change",
		"incident:D-1 -failure-> failure_mode:unstaged config push",
	}, extractDoc(t, cfg, "incident", "## Timeline\nWrites failed with \"no space left on device\". The disk was full.\n\n"+
		"## Root cause\nA feature flag was pushed to every region at once.\n\n## Action items\n- Alert before the certificate expires."))
	require.Equal(t, []string{"incident:D-1 -failure-> failure_mode:configuration change"},
		extractDoc(t, cfg, "incident", "Summary of impact: logins failed. Root cause: a misconfiguration of the gateway settings."))
	// Two cues of a mode starting at one word: the stronger one counts
	// ("deployment of" alone is weak, "deployment of ... brought down" is
	// not), so the deploy outweighs the weak configuration cue before it.
	require.Equal(t, []string{"incident:D-1 -failure-> failure_mode:deploy"},
		extractDoc(t, cfg, "incident", "Someone modified the pool settings at noon. The deployment of build 7 brought down checkout."))
	// Only incident documents are classified.
	require.Empty(t, extractDoc(t, cfg, "page", "The TLS certificate expired."))
	// A tenant's own taxonomy.
	tx, err := taxonomy.Parse([]byte("modes:\n- name: cosmic ray\n  tier: 1\n  cues: [{pattern: 'bit flip'}]\n"))
	require.NoError(t, err)
	cfg.Taxonomy = tx
	require.Equal(t, []string{"incident:D-1 -failure-> failure_mode:cosmic ray"},
		extractDoc(t, cfg, "incident", "A bit flip corrupted the cache."))
}

func TestPatternsRelateMentions(t *testing.T) {
	g := offline.StaticGazetteer{
		{ID: "service:checkoutapi", Type: "service", Name: "checkout-api", Key: "checkoutapi"},
		{ID: "datastore:ordersdb", Type: "datastore", Name: "orders-db", Key: "ordersdb"},
		{ID: "team:payments", Type: "team", Name: "Payments", Key: "payments"},
	}
	cfg := offline.Config{Gazetteer: g, DisableMentions: true, DisableTaxonomy: true}
	require.Equal(t, []string{
		"datastore:ordersdb -owned_by-> team:payments",
		"service:checkoutapi -depends_on-> datastore:ordersdb",
	}, extractDoc(t, cfg, "page", "checkout-api depends on orders-db. orders-db is owned by the Payments team."))

	// Affected needs an outage cue in the sentence naming the service,
	// with the document fallback when no cue sentence names one.
	require.Equal(t, []string{"incident:D-1 -affected-> service:checkoutapi"},
		extractDoc(t, cfg, "incident", "checkout-api returned 503s for 5 minutes. The Payments team was paged."))
	require.Equal(t, []string{"incident:D-1 -affected-> service:checkoutapi"},
		extractDoc(t, cfg, "incident", "A retry storm started in checkout-api. Orders failed."))
	// Components are involved when named in a sentence with a cause cue.
	require.Equal(t, []string{"incident:D-1 -involved-> component:rate-limiter"},
		extractDoc(t, cfg, "incident", "A rate-limiter config was pushed everywhere. We had lunch near the message-queue."))

	p, err := offline.ParsePatterns([]byte(`patterns:
  - name: runs-in
    relation: ran_in
    from: mention
    source_types: [service]
    target_types: [component]
    between: '\s+runs\s+in\s+'
`))
	require.NoError(t, err)
	require.Equal(t, []string{"runs-in"}, p.Names())
	cfg.Patterns = p
	require.Equal(t, []string{"service:checkoutapi -ran_in-> component:east-cluster-controller"},
		extractDoc(t, cfg, "page", "checkout-api runs in east-cluster-controller."))

	for name, doc := range map[string]string{
		"bad from":     "patterns: [{relation: r, from: x, target_types: [a]}]",
		"no relation":  "patterns: [{from: document, document_types: [incident], target_types: [a]}]",
		"bad cue":      "patterns: [{relation: r, from: document, document_types: [i], target_types: [a], cues: ['(']}]",
		"no between":   "patterns: [{relation: r, from: mention, source_types: [a], target_types: [a]}]",
		"bad fallback": "patterns: [{relation: r, from: document, document_types: [i], target_types: [a], fallback: all}]",
		"unknown key":  "patterns: [{relation: r, from: document, document_types: [i], target_types: [a], cue: [x]}]",
	} {
		_, err := offline.ParsePatterns([]byte(doc))
		require.Error(t, err, name)
	}
}

func TestNounPhraseCoOccurrence(t *testing.T) {
	tagger, err := offline.NewTagger()
	require.NoError(t, err)
	np, err := offline.NewNounPhraseStage(offline.NounPhraseConfig{Tagger: tagger})
	require.NoError(t, err)
	phrases, err := np.NounPhrases("The primary database ran out of connections for ten minutes because of a retry storm.")
	require.NoError(t, err)
	require.Contains(t, phrases, "primary database")
	require.Contains(t, phrases, "retry storm")
	require.NotContains(t, phrases, "minutes", "generic nouns are dropped")

	cfg := offline.Config{DisableTaxonomy: true, DisablePatterns: true,
		NounPhrases: offline.NounPhraseConfig{Enabled: true, Tagger: tagger}}
	text := "The primary database lost its replica. The replica lag alarm fired, and the primary database was restarted."
	got := extractDoc(t, cfg, "runbook", text)
	require.Contains(t, got, "concept:primary database -co_occurs-> concept:replica")
	require.Contains(t, got, "concept:primary database -co_occurs-> concept:replica lag alarm")
	// Off for incidents unless asked.
	require.Empty(t, extractDoc(t, cfg, "incident", text))
	cfg.NounPhrases.IncludeIncidents = true
	require.NotEmpty(t, extractDoc(t, cfg, "incident", text))

	// Weight: 1 for the unit plus 1 per sentence holding both.
	x, err := offline.New(cfg)
	require.NoError(t, err)
	require.Equal(t, []string{"mentions", "co-occurrence", "noun_phrases"}, x.Stages())
	doc := &events.DocChanged{Header: events.Header{Tenant: "acme"}, DocID: "D-1", Version: 1, DocType: "runbook", Text: text}
	_, rels, err := x.Extract(context.Background(), doc, []events.TextUnit{{ID: "u1", Text: text, End: len(text)}})
	require.NoError(t, err)
	for _, r := range rels {
		if r.Source == "primary database" && r.Target == "replica" {
			require.Equal(t, 2.0, r.Strength)
		}
		if r.Source == "primary database" && r.Target == "replica lag alarm" {
			require.Equal(t, 2.0, r.Strength)
		}
	}
	_, err = offline.NewNounPhraseStage(offline.NounPhraseConfig{MaxPhrases: -1})
	require.Error(t, err)
}

func TestCoOccurrenceRelatesWhatOneSentenceNames(t *testing.T) {
	cfg := offline.Config{DisableTaxonomy: true, DisableMentions: true, DisablePatterns: true}
	got := extractDoc(t, cfg, "incident", "Kafka and ZooKeeper restarted. Kafka lost ZooKeeper again. "+
		"Redis was fine. Kafka, Redis, Varnish, Squid, HAProxy and Envoy were listed. Traefik calls Redis.")
	require.Equal(t, []string{
		"component:kafka -co_occurs-> component:zookeeper",
		"component:traefik -co_occurs-> datastore:redis",
	}, got, "a pair per document, no edge from a list of more than five")
	x, err := offline.New(cfg)
	require.NoError(t, err)
	text := "Kafka and ZooKeeper restarted. Kafka lost ZooKeeper again. Then Kafka and ZooKeeper failed. Kafka and ZooKeeper, five times. Kafka and ZooKeeper."
	doc := &events.DocChanged{Header: events.Header{Tenant: "acme"}, DocID: "D-1", Version: 1, DocType: "incident", Text: text}
	_, rels, err := x.Extract(t.Context(), doc, []events.TextUnit{{ID: "u1", Text: text, End: len(text)}})
	require.NoError(t, err)
	require.Len(t, rels, 1)
	require.Equal(t, 1.0, rels[0].Strength, "0.25 a sentence, at most 1")
	require.Equal(t, "Kafka and ZooKeeper restarted.", text[rels[0].SentenceStart:rels[0].SentenceEnd], "cites the first sentence")

	// A stated relation wins over co-occurrence.
	cfg.DisablePatterns = false
	for _, r := range extractDoc(t, cfg, "incident", "The checkout-api depends on Redis.") {
		require.NotContains(t, r, "co_occurs")
	}
}

func TestPatternsReadCallsUsesAndImpact(t *testing.T) {
	cfg := offline.Config{DisableTaxonomy: true, DisableMentions: true, DisableCoOccurrence: true}
	for text, want := range map[string]string{
		"The checkout-api depends on Redis.":              "service:checkout-api -depends_on-> datastore:redis",
		"Parsoid calls the MediaWiki API.":                "component:parsoid -calls-> component:mediawiki",
		"Traefik uses Consul for its configuration.":      "component:traefik -uses-> component:hashicorpconsul",
		"Kafka outage took down the ingest-worker.":       "component:kafka -impacted-> service:ingest-worker",
		"The orders-db was backed by Amazon EBS volumes.": "component:orders-db -uses-> cloud_service:amazonebs",
	} {
		require.Contains(t, extractDoc(t, cfg, "incident", text), want, text)
	}
	for _, text := range []string{"Traefik and Redis restarted.", "Redis, after Traefik was restarted, recovered and uses less memory."} {
		for _, r := range extractDoc(t, cfg, "incident", text) {
			require.NotContains(t, r, "-uses->", text)
			require.NotContains(t, r, "-calls->", text)
		}
	}
}

// TestFailureStageIgnoresPastedText: a cue in a line pasted from a chat
// transcript, a log or a stack trace is what someone typed or a program
// printed during the incident, not the postmortem's cause.
func TestFailureStageIgnoresPastedText(t *testing.T) {
	cfg := offline.Config{DisablePatterns: true, DisableMentions: true}
	for _, pasted := range []string{
		"[10:02] <kim> the scratch volume ran out of disk space again",
		"10:02:11 <kim> looks like a deadlock in the exporter",
		"2024-05-06 10:02:11,001 ERROR exporter - out of memory, heap exhausted",
		"PROBLEM - Disk space on build4 is CRITICAL: disk full",
		"\tat org.example.Exporter.flush(Exporter.java:88) deadlock detected",
		"The dump showed thread 0x00007f00aa11bb22 in a deadlock.",
	} {
		// Alone, the pasted line names nothing.
		require.Empty(t, extractDoc(t, cfg, "incident", "The exporter stopped.\n"+pasted+"\nIt was restarted."), pasted)
		// Beside the prose cause, the prose cause is the failure mode.
		require.Equal(t, []string{"incident:D-1 -failure-> failure_mode:configuration change"},
			extractDoc(t, cfg, "incident", "The exporter stopped after a config change to its batch settings.\n"+pasted+"\nIt was restarted."), pasted)
	}
	// The same words in prose count.
	require.Equal(t, []string{
		"failure_mode:disk full -is_a-> failure_mode:resource exhaustion",
		"incident:D-1 -failure-> failure_mode:disk full",
	}, extractDoc(t, cfg, "incident", "The exporter stopped.\nAt 10:02 the scratch volume ran out of disk space.\nIt was restarted."))
}

// An action item's line (a task checkbox, a tracker status, a TODO) says
// what is to be done, wherever the follow-up list stands: its cue is no
// cause.
func TestFailureStageIgnoresActionItemLines(t *testing.T) {
	cfg := offline.Config{DisablePatterns: true, DisableMentions: true}
	for _, item := range []string{
		"• Status: Done Add an alert before the spool volume is full",
		"• Status: Unresolved Find the upstream bug behind the restarts",
		"- [ ] page when the scratch disk runs out of disk space",
		"[x] Fix the faulty release checklist",
		"TODO: tune the pool so we never run out of memory again",
	} {
		text := "The report builder stopped for an hour.\n" + item + "\nIt was restarted."
		require.Empty(t, extractDoc(t, cfg, "incident", text), item)
	}
	// The same words in a prose line count.
	require.Equal(t, []string{
		"failure_mode:disk full -is_a-> failure_mode:resource exhaustion",
		"incident:D-1 -failure-> failure_mode:disk full",
	}, extractDoc(t, cfg, "incident", "The report builder stopped.\n• Done at 10:00: the spool volume was full.\nIt was restarted."))
}

// An inline label written capitalised after a list flattened into a
// paragraph ("... on the edge Next steps: ...") opens its section as one
// after a full stop does.
func TestSectionsFindLabelsAfterFlattenedLists(t *testing.T) {
	text := "Impact: uploads failed for an hour. Root cause: a bad config change on the edge " +
		"Mitigation: the change was reverted Next steps: alert before a disk is full."
	kinds := map[string]offline.SectionKind{}
	for _, s := range offline.Sections(text) {
		kinds[strings.Fields(strings.TrimLeft(text[s.Start:], ". \t"))[0]] = s.Kind
	}
	require.Equal(t, map[string]offline.SectionKind{"Impact:": offline.SectionContext, "Root": offline.SectionCause,
		"Mitigation:": offline.SectionContext, "Next": offline.SectionFollowUp}, kinds)
	// So a cue in the next steps counts nothing.
	cfg := offline.Config{DisablePatterns: true, DisableMentions: true}
	require.Empty(t, extractDoc(t, cfg, "incident", "Impact: uploads failed for an hour. The edge was restarted "+
		"Next steps: alert before the volume is full."))
	// Lower case, the words are prose.
	require.Len(t, offline.Sections("The root cause: nobody knew. We took next steps: none."), 0)
}

// "Final root cause and mitigation:" opens a root-cause section as
// "Preliminary root cause:" does: a cue in it outweighs one in the impact
// summary before it.
func TestSectionsFindFinalRootCause(t *testing.T) {
	text := "Summary of impact: a traffic spike and a flood of requests hit the API for an hour.\n\n" +
		"Final root cause and mitigation: engineers reviewed the hall. A relay's cooling system failed there."
	var kinds []offline.SectionKind
	for _, s := range offline.Sections(text) {
		kinds = append(kinds, s.Kind)
	}
	require.Equal(t, []offline.SectionKind{offline.SectionContext, offline.SectionCause}, kinds)
	cfg := offline.Config{DisablePatterns: true, DisableMentions: true}
	require.Equal(t, []string{"incident:D-1 -failure-> failure_mode:power or cooling"}, extractDoc(t, cfg, "incident", text))
	// Inside a sentence the words are prose.
	require.Len(t, offline.Sections("We wrote the final root cause: later."), 0)
}

// A label opening a list item ("• Cause: ...") opens its section as one at
// a line's start does: a person's slip stated as the cause outweighs the
// load it led to.
func TestSectionsFindLabelsOpeningListItems(t *testing.T) {
	text := "• Effect: the image tier returned errors.\n• Cause: operator error (too many caches restarted at once)\n" +
		"• Resolution: the caches were brought back one by one.\n" +
		"The backends took the surge of traffic but the queue hosts were overloaded."
	kinds := map[string]offline.SectionKind{}
	for _, s := range offline.Sections(text) {
		kinds[strings.Fields(strings.TrimLeft(text[s.Start:], "• \t"))[0]] = s.Kind
	}
	require.Equal(t, map[string]offline.SectionKind{"Cause:": offline.SectionCause, "Resolution:": offline.SectionContext}, kinds)
	cfg := offline.Config{DisablePatterns: true, DisableMentions: true}
	require.Equal(t, []string{"incident:D-1 -failure-> failure_mode:operator error"}, extractDoc(t, cfg, "incident", text))
}

// A text saying the incident's cause is unknown names no cause, whatever
// symptom it describes; a cue that judges the cause outright still does,
// and the unknown cause of a named failure is no unknown cause of the
// incident.
func TestFailureStageUndeterminedCause(t *testing.T) {
	cfg := offline.Config{DisablePatterns: true, DisableMentions: true}
	for _, text := range []string{
		"The build hosts dropped off the network twice. The cause is still unknown. The hosts were upgraded to the new kernel.",
		"The queue stalled for an hour. It is unclear what caused the stall; the spool volume was full by then.",
		"The queue stalled for an hour. We could not determine the root cause. The spool volume was full by then.",
	} {
		require.Empty(t, extractDoc(t, cfg, "incident", text), text)
	}
	require.Equal(t, []string{
		"failure_mode:bad deploy -is_a-> failure_mode:deploy",
		"incident:D-1 -failure-> failure_mode:bad deploy",
	}, extractDoc(t, cfg, "incident", "Checkout failed. The cause is not yet known, but a faulty release was rolled back at noon."))
	require.Equal(t, []string{
		"failure_mode:network failure -is_a-> failure_mode:network",
		"incident:D-1 -failure-> failure_mode:network failure",
	}, extractDoc(t, cfg, "incident", "The top of rack switch in row B went down. The cause of the switch failure could not be determined."))
	// In the follow-up section it tells nothing of the incident.
	require.Equal(t, []string{
		"failure_mode:disk full -is_a-> failure_mode:resource exhaustion",
		"incident:D-1 -failure-> failure_mode:disk full",
	}, extractDoc(t, cfg, "incident", "The spool volume was full.\n\n## Lessons learned\nWhy the alert did not fire, the cause is unknown."))
}

// A document whose text names no cause is classified by its title, the
// author's summary of it; never when the text names one.
func TestFailureStageReadsTheTitleLast(t *testing.T) {
	cfg := offline.Config{DisablePatterns: true, DisableMentions: true}
	x, err := offline.New(cfg)
	require.NoError(t, err)
	extract := func(title, text string) []string {
		doc := &events.DocChanged{Header: events.Header{Tenant: "acme"}, DocID: "D-1", Version: 1, DocType: "incident", Title: title, Text: text}
		_, rels, err := x.Extract(t.Context(), doc, []events.TextUnit{{ID: "u1", Text: text, End: len(text)}})
		require.NoError(t, err)
		return triples(rels)
	}
	require.Equal(t, []string{"incident:D-1 -failure-> failure_mode:hardware"},
		extract("20240102-StorageDiskFailure", "The archive was unavailable for an hour. It was failed over to the standby."))
	require.Equal(t, []string{
		"failure_mode:dns misconfiguration -is_a-> failure_mode:dns",
		"incident:D-1 -failure-> failure_mode:dns misconfiguration",
	}, extract("20240102-StorageDiskFailure", "The archive was unavailable after a DNS record change."))
	require.Empty(t, extract("20240102-Archive", "The archive was unavailable for an hour."))
}

// Titles a status page writes in capitals without a colon inside a
// paragraph ("... for an hour. ROOT CAUSE The ...") open their sections as
// labels do: a cue in the remediation counts nothing, one in the root
// cause twice.
func TestSectionsFindCapitalTitlesWithoutColon(t *testing.T) {
	text := "ISSUE SUMMARY Checkout failed for an hour. ROOT CAUSE The scheduler hit a latent issue. " +
		"REMEDIATION AND PREVENTION We will alert before the spool volume is full."
	kinds := map[string]offline.SectionKind{}
	for _, s := range offline.Sections(text) {
		kinds[strings.Fields(strings.TrimLeft(text[s.Start:], ". \t"))[0]] = s.Kind
	}
	require.Equal(t, map[string]offline.SectionKind{"ISSUE": offline.SectionSummary, "ROOT": offline.SectionCause,
		"REMEDIATION": offline.SectionFollowUp}, kinds)
	cfg := offline.Config{DisablePatterns: true, DisableMentions: true}
	require.Empty(t, extractDoc(t, cfg, "incident", "ISSUE SUMMARY Checkout failed for an hour. "+
		"REMEDIATION AND PREVENTION We will make sure the spool volume is never full again."))
	// The root cause outweighs the symptom the summary repeats.
	require.Equal(t, []string{"incident:D-1 -failure-> failure_mode:software bug"}, extractDoc(t, cfg, "incident",
		"ISSUE SUMMARY Tenants saw elevated packet loss. Packet loss lasted two hours. "+
			"ROOT CAUSE The controller encountered a latent issue in its quota logic."))
	// Capitals inside a sentence are no title.
	require.Empty(t, offline.Sections("We wrote ROOT CAUSE Analysis on the page."))
}
