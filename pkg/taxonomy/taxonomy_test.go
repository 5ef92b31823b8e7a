package taxonomy_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/taxonomy"
)

func defaultTaxonomy(t *testing.T) *taxonomy.Taxonomy {
	t.Helper()
	tx, err := taxonomy.Default()
	require.NoError(t, err)
	return tx
}

// sentences splits test text on ". " only: enough for these cases.
func sentences(text string) []taxonomy.Span {
	var out []taxonomy.Span
	start := 0
	for {
		i := strings.Index(text[start:], ". ")
		if i < 0 {
			return append(out, taxonomy.Span{Start: start, End: len(text)})
		}
		out = append(out, taxonomy.Span{Start: start, End: start + i + 1})
		start += i + 2
	}
}

func selected(tx *taxonomy.Taxonomy, text string) []string {
	var out []string
	for _, h := range taxonomy.Select(tx.Find(text, sentences(text))) {
		out = append(out, h.Mode)
	}
	return out
}

// requireNoCause checks that each text holds a cue and that none of its
// cues is selected as a cause.
func requireNoCause(t *testing.T, tx *taxonomy.Taxonomy, texts ...string) {
	t.Helper()
	for _, text := range texts {
		hits := tx.Find(text, nil)
		require.NotEmpty(t, hits, "the cue is there: %s", text)
		require.Empty(t, taxonomy.Select(hits), text)
	}
}

func TestDefaultTaxonomyClassifies(t *testing.T) {
	tx := defaultTaxonomy(t)
	for _, tc := range []struct {
		text string
		want []string
	}{
		// Generic postmortem phrasings, one mode each.
		{"The wildcard TLS certificate for the API expired at 02:00 UTC.", []string{"expired certificate"}},
		{"Clients saw handshake failures caused by an expired intermediate certificate.", []string{"expired certificate"}},
		{"The new firewall rule was rolled out to all regions without a canary.", []string{"unstaged config push"}},
		{"A feature flag was pushed to every customer at once.", []string{"unstaged config push"}},
		{"The API exhausted its database connection pool under load.", []string{"connection pool exhaustion"}},
		{"Postgres refused new clients with too many connections.", []string{"connection pool exhaustion"}},
		{"The log volume was full and writes failed with no space left on device.", []string{"disk full"}},
		{"The outage came from the data disk filling up on the indexer.", []string{"disk full"}},
		{"Nodes could not resolve the registry hostname after a DNS zone change.", []string{"dns misconfiguration"}},
		{"Restarting the writers after a temporary switch of the db-primary CNAME stopped all writes.", []string{"dns misconfiguration"}},
		{"The CNAME change for the login host went out at noon.", []string{"dns misconfiguration"}},
		// Failed lookups are a symptom: the cause named beside them wins.
		{"Clients could not resolve the API host after a network partition between the two rooms.", []string{"network failure"}},
		{"Replication shipped corrupted index pages to the replicas.", []string{"data corruption"}},
		{"The outage followed inconsistent metadata between the two stores.", []string{"data corruption"}},
		{"A replication inconsistency left some accounts without keys.", []string{"data corruption"}},
		{"The datacenter suffered a loss of utility power and the generators failed to start.", []string{"power failure"}},
		{"Workers were OOMKilled repeatedly.", []string{"memory exhaustion"}},
		{"A fiber cut between the two sites caused packet loss.", []string{"network failure"}},
		{"The top of rack switch sw-b4 went down and took the row offline.", []string{"network failure"}},
		{"The primary database host crashed after its RAID battery failure.", []string{"hardware"}},
		{"The hypervisor overheated and powered itself off.", []string{"power or cooling"}},
		{"The network switch for the third rack in row B went offline.", []string{"network failure"}},
		{"It was an operator error during the cache warm-up.", []string{"operator error"}},
		{"The cache hosts stopped serving after a puppet change renamed a host fact.", []string{"configuration change"}},
		{"Terraform changes applied at noon removed the load balancer attachments.", []string{"configuration change"}},
		{"A faulty release introduced a null pointer in the login path.", []string{"bad deploy"}},
		{"The translation changes did not deploy properly, and the cache then ran out of memory.", []string{"bad deploy"}},
		{"Due to a logic bug, the worker dropped the table; the disk was full an hour later.", []string{"software bug"}},
		{"A planned upgrade of the cluster from version 1.13 to 1.14 caused a resolver issue.", []string{"bad upgrade"}},
		{"The version bump of the ingress controller caused restarts.", []string{"bad upgrade"}},
		{"A traffic spike overloaded the frontends.", []string{"traffic surge"}},
		{"Over the weekend the request rate on the shard had grown much faster than expected.", []string{"traffic surge"}},
		{"Ingest throughput has increased significantly since the launch.", []string{"traffic surge"}},
		{"Our upstream payment provider outage made checkouts fail.", []string{"dependency failure"}},
		{"Latency rose for ten minutes.", nil},
		{"Instances that were live migrated from one host to another lost their routes.", nil},
		{"We migrated the queue from the old cluster to the new one and consumers stalled.", []string{"upgrade"}},
	} {
		require.Equal(t, tc.want, selected(tx, tc.text), tc.text)
	}
}

func TestNetworkFailureNeedsAFailureCue(t *testing.T) {
	tx := defaultTaxonomy(t)
	for _, text := range []string{
		"The network team was paged at 09:00.",
		"Traffic enters the network through the edge routers.",
		"Azure uses the Border Gateway Protocol (BGP) to advertise routes for its services.",
		"RCA - Azure DNS - Connectivity issues.",
		"Customers saw connectivity issues to their virtual machines.",
		"Virtual network peering was slow to provision.",
	} {
		require.Nil(t, selected(tx, text), text)
	}
	for _, text := range []string{
		"This was caused by the failure of a subset of network devices in the region.",
		"Datacenters in the region experienced a loss of network connectivity for 62 minutes.",
		"Network connectivity to the region was unavailable for an hour.",
		"We received an alert that there were network connectivity issues in the region.",
		"The physical network links to some devices were disrupted during maintenance.",
		"Multiple BGP routes were withdrawn by the faulty router.",
		"A partial connectivity loss to the router left the zone unreachable.",
	} {
		require.Equal(t, []string{"network failure"}, selected(tx, text), text)
	}
}

func TestNegatedAndHedgedCuesAreIgnored(t *testing.T) {
	tx := defaultTaxonomy(t)
	requireNoCause(t, tx,
		"We checked the ingress and no certificate had expired.",
		"The certificate had not expired; the handshake failed for another reason.",
		"A DNS change was not the cause.",
		"We initially suspected a DNS outage.",
		"At first it looked like a network outage.",
		"It was thought that a DNS outage was behind it.",
		"We checked whether the disk was full.",
		"The ops team checked for hardware faults on the host.",
		"Without the retry, the workers would have run out of memory.",
		"We did not run out of disk space.",
		"The config change was not pushed to all regions.",
		// An unrelated failure, and a rule for the future, are no cause.
		"There was also an unrelated race condition in the exporter.",
		"When there is such a config change, it must be applied gradually.",
		"In case of a traffic surge, the pool is scaled out.",
		"If there is ever again a sudden and very large traffic surge, the pool scales out.",
		// A conditional on any one of a kind in the present tense states
		// how the system works.
		"When a tenant changes its quota, the scheduler makes a configuration change on every node.",
	)
	// A past event told with "when" is what happened.
	require.Equal(t, []string{"configuration change"},
		selected(tx, "When the rollout reached the second region, a bad config change took the API down."))
	// Nor does a conditional in another clause.
	require.Equal(t, []string{"disk full"},
		selected(tx, "When there is a page the on-call answers it; that night the log volume ran out of disk space."))
	// A negation in another clause does not reach the cue.
	require.Equal(t, []string{"expired certificate"},
		selected(tx, "Nothing else changed, but the TLS certificate on the load balancer expired."))
}

func TestOnePrimaryModeUnlessAsserted(t *testing.T) {
	tx := defaultTaxonomy(t)
	// The upgrade is context; the expiry is the mechanism.
	require.Equal(t, []string{"expired certificate"}, selected(tx,
		"After an upgrade of the issuer the webhook certificate expired."))
	// Unless the text judges the upgrade: then it names the cause.
	require.Equal(t, []string{"bad upgrade"}, selected(tx,
		"A faulty upgrade of the issuer stopped renewals and the webhook certificate expired."))
	// A specific mechanism beats a broad class, whatever comes first.
	require.Equal(t, []string{"connection pool exhaustion"}, selected(tx,
		"A retry storm exhausted the connection pool of the orders database."))
	// A sentence that asserts causes outright keeps each of them.
	require.Equal(t, []string{"disk full", "bad deploy"}, selected(tx,
		"Root causes: the data volume was full, and a bad deploy doubled log volume."))
	// A cause the text names outranks a mechanism it only describes.
	require.Equal(t, []string{"bad deploy"}, selected(tx,
		"The disk was full. Contributing factors: a bad deploy that doubled log volume."))
	require.Equal(t, []string{"expired certificate", "dns misconfiguration"}, selected(tx,
		"The root causes were an expired certificate and a DNS record change."))
	// "The reason was ..." at a sentence's start names a cause too; a
	// reason elsewhere in a sentence does not.
	require.Equal(t, []string{"configuration change"}, selected(tx,
		"After the recent deployment of the exporter, alerts fired. Reason was the configuration change on the metric labels."))
	require.Equal(t, []string{"deploy"}, selected(tx,
		"After the recent deployment of the exporter, alerts fired. We found the reason in the configuration change on the metric labels."))
}

func TestParseRejectsBadTaxonomies(t *testing.T) {
	for name, doc := range map[string]string{
		"empty":       "version: 1\n",
		"bad regexp":  "modes:\n- name: x\n  tier: 1\n  cues: [{pattern: '('}]\n",
		"no cues":     "modes:\n- name: x\n  tier: 1\n",
		"no tier":     "modes:\n- name: x\n  cues: [{pattern: 'a'}]\n",
		"duplicate":   "modes:\n- name: x\n  tier: 1\n  cues: [{pattern: 'a'}]\n- name: X\n  tier: 1\n  cues: [{pattern: 'b'}]\n",
		"unknown key": "modes:\n- name: x\n  tier: 1\n  cue: [{pattern: 'a'}]\n",
	} {
		_, err := taxonomy.Parse([]byte(doc))
		require.ErrorIs(t, err, taxonomy.ErrInvalid, name)
	}
	tx, err := taxonomy.Parse([]byte("modes:\n- name: ' Bad  Upgrade '\n  tier: 2\n  cues: [{pattern: 'upgrade broke'}]\n"))
	require.NoError(t, err)
	m, ok := tx.Mode("bad upgrade")
	require.True(t, ok)
	require.Equal(t, "Bad Upgrade", m.Name)
	require.Equal(t, 1.0, m.Cues[0].Weight)
	require.Equal(t, []string{"Bad Upgrade"}, selected(tx, "The upgrade broke logins."))
}

func TestDefaultYAMLIsACopy(t *testing.T) {
	b := taxonomy.DefaultYAML()
	b[0] = 'X'
	require.NotEqual(t, b[0], taxonomy.DefaultYAML()[0])
}

func FuzzFind(f *testing.F) {
	tx, err := taxonomy.Default()
	require.NoError(f, err)
	f.Add("the certificate expired, no DNS change")
	f.Fuzz(func(t *testing.T, text string) {
		for _, h := range tx.Find(text, sentences(text)) {
			if h.Start < h.Sentence.Start || h.End > h.Sentence.End || h.Start > h.End {
				t.Fatalf("hit %+v outside its sentence", h)
			}
		}
	})
}

func TestTaxonomyV2GenericModes(t *testing.T) {
	tx := defaultTaxonomy(t)
	require.Equal(t, 2, tx.Version)
	generic := map[string]bool{}
	for _, m := range tx.Modes {
		if m.Parent == "" {
			generic[m.Name] = true
		}
	}
	for _, g := range []string{"configuration change", "software bug", "deploy", "upgrade", "traffic surge",
		"resource exhaustion", "certificate expiry", "dns", "network", "hardware", "power or cooling", "dependency",
		"operator error", "security", "data corruption"} {
		require.True(t, generic[g], "generic mode %q", g)
	}
	for child, parent := range map[string]string{"expired certificate": "certificate expiry",
		"unstaged config push": "configuration change", "disk full": "resource exhaustion", "bad upgrade": "upgrade",
		"dns misconfiguration": "dns", "data corruption": "data corruption", "unknown mode": "unknown mode"} {
		require.Equal(t, parent, tx.Generic(child), child)
	}
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"A misconfiguration in the deployment's settings broke the service.", []string{"configuration change"}},
		{"A latent bug in the storage layer crashed the metadata nodes.", []string{"software bug"}},
		{"The maintenance engineer accidentally triggered the fire alarm.", []string{"operator error"}},
		{"Spammers sent a flood of mail that overwhelmed the relays.", []string{"security"}},
		{"A failed line card took the backbone router down.", []string{"hardware"}},
		{"A malfunction left the cooling system with reduced air flow.", []string{"power or cooling"}},
		// A finer mode wins within its family; the family with more weight
		// wins across families.
		{"The certificate expired after its credentials expired.", []string{"expired certificate"}},
	} {
		require.Equal(t, tc.want, selected(tx, tc.text), tc.text)
	}
	_, err := taxonomy.Parse([]byte("modes:\n  - {name: a, parent: b, tier: 1, cues: [{pattern: x}]}\n"))
	require.ErrorIs(t, err, taxonomy.ErrInvalid, "a parent must be a mode")
	_, err = taxonomy.Parse([]byte("modes:\n  - {name: a, parent: b, tier: 1, cues: [{pattern: x}]}\n  - {name: b, parent: c, tier: 1, cues: [{pattern: y}]}\n  - {name: c, tier: 1, cues: [{pattern: z}]}\n"))
	require.ErrorIs(t, err, taxonomy.ErrInvalid, "two levels only")
}

// TestSelectReadsTheCauseNotTheRepeatedSymptom: a symptom repeated through
// a text counts less with every repetition, a finer mode's cue and its
// generic mode's at one place count once, one weak cue alone is no cause,
// and "was not" negates only the cue it follows, not the next clause's.
func TestSelectReadsTheCauseNotTheRepeatedSymptom(t *testing.T) {
	tx := defaultTaxonomy(t)
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"Requests were throttled. Clients were throttled again. Jobs were throttled. Users were throttled. " +
			"The cause was a configuration error in the proxy.", []string{"configuration change"}},
		{"The cluster was overloaded. The web tier was overloaded. Later the API was overloaded. " +
			"A configuration error in the scheduler broke the job queue.", []string{"configuration change"}},
		{"The web servers ran out of disk space. A race condition in the uploader was found.", []string{"disk full"}},
		{"Requests were throttled for a while.", nil},
		{"A network device experienced a hardware fault and that traffic was not automatically rerouted.", []string{"hardware"}},
		{"A recent deployment introduced a task that was not validating subscriptions.", []string{"bad deploy"}},
		{"The hardware fault was not the cause of the outage.", nil},
		{"A backend service had reached an operational threshold, preventing requests from completing.", []string{"resource exhaustion"}},
		{"A breaker tripped during planned power maintenance.", []string{"power or cooling"}},
		{"The Grafana Agent pod was using a high amount of memory on the node.", []string{"memory exhaustion"}},
	} {
		require.Equal(t, tc.want, selected(tx, tc.text), tc.text)
	}
}

// Sentences that mention a cause word without naming a cause: a bug
// report filed, a rate limit hit, a mistake made in a configuration
// change (which is the configuration change).
func TestCuesThatAreNoCause(t *testing.T) {
	tx := defaultTaxonomy(t)
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"If your project has something missing, please file a bug on the tracker.", nil},
		{"The team will open a bug with the upstream maintainers.", nil},
		{"Greg escalated the bug report to the core list.", nil},
		{"I grepped the limiter log to find out what is hitting the throttle limit.", nil},
		{"The workers hit the memory limit and were killed.", []string{"resource exhaustion"}},
		{"A typo in the web config change took every site down.", []string{"configuration change"}},
		{"The namespace labels were modified, accidentally overwriting the existing annotations.", []string{"configuration change"}},
		{"An engineer accidentally deleted the production volume.", []string{"operator error"}},
		{"The rate limiting configuration has been added and deployed that day.", []string{"configuration change"}},
		{"He moved on to preparing for the tracker upgrade at midnight.", nil},
		{"We will move the tracker upgrade window away from the deploy window.", nil},
		{"The database upgrade broke replication.", []string{"bad upgrade"}},
		{"The patch https://review.example.org/c/1234/ brought down the API cluster.", []string{"deploy"}},
		{"The cabling work was postponed because the crew ran out of the maintenance window.", nil},
		{"The new proxy version had vendor specific changes that its release notes left out.", nil},
		{"A provider change to the peering routes dropped half the traffic.", []string{"dependency"}},
		{"At 10:02 the dashboards showed a sudden spike of \"backend fetch\" errors.", nil},
		{"The on-call engineer got a flood of alerts from the queue hosts.", nil},
		{"A spike in searches from a single crawler took the cluster down.", []string{"traffic surge"}},
		{"The builders ran out of file handles after the release.", []string{"resource exhaustion"}},
	} {
		require.Equal(t, tc.want, selected(tx, tc.text), tc.text)
	}
}

// TestEffectsWeighHalf: a cue its sentence presents as the effect of
// something else ("..., causing X", "which in turn caused X", "X affected
// Y") or in the clause of the remedy ("... to mitigate the issue") weighs
// EffectWeight times the cue's weight; elsewhere it weighs in full, also
// after "caused by", and so does the rollback that mitigated.
func TestEffectsWeighHalf(t *testing.T) {
	tx := defaultTaxonomy(t)
	effect := func(text, cue string) taxonomy.Hit {
		t.Helper()
		for _, h := range tx.Find(text, nil) {
			if text[h.Start:h.End] == cue {
				return h
			}
		}
		t.Fatalf("no hit %q in %q", cue, text)
		return taxonomy.Hit{}
	}
	for _, tc := range []struct {
		text, cue string
		effect    bool
	}{
		{"The scheduler did not restart after the reboot, causing the queue to be overloaded.", "overloaded", true},
		{"The proxy dropped its cache, which in turn caused a retry storm.", "retry storm", true},
		{"The data loss affected every table.", "data loss", true},
		// What a cause made something else do is its effect.
		{"The new page template caused the render servers to overload.", "overload", true},
		{"The slow failover forced the primary database to run out of memory.", "run out of memory", true},
		{"The queue was overloaded.", "overloaded", false},
		{"The outage was caused by a retry storm.", "retry storm", false},
		{"A retry storm took the proxy down.", "retry storm", false},
		// The remedy is no cause either, unless it is the rollback.
		{"Engineers made a config change and restarted the proxies to mitigate the issue.", "config change", true},
		{"The team mitigated the impact by scaling out after a retry storm.", "retry storm", true},
		{"Engineers rolled back the recent deployment to mitigate the issue.", "rolled back the recent deployment", false},
		{"A retry storm overwhelmed the proxy, and engineers restarted it to restore service.", "retry storm", false},
		// What prolonged the outage aggravated it: it did not cause it.
		{"An operator mistake during the failover prolonged the recovery by ten minutes.", "operator mistake", true},
		// A sentence that opens with the remedy tells it in every clause,
		// after an inline label too; a remedy phrase inside a later or
		// subordinate clause does not reach the other clauses.
		{"To mitigate, the on-call team changed the config on the proxies.", "changed the config", true},
		{"Mitigation: As a workaround, engineers made a config change on the edge.", "config change", true},
		{"While the team worked to restore the cache, a bad config change reached the edge.", "bad config", false},
	} {
		h := effect(tc.text, tc.cue)
		require.Equal(t, tc.effect, h.Effect, tc.text)
		m, _ := tx.Mode(h.Mode)
		var w float64
		for _, c := range m.Cues {
			if c.Pattern == h.Cue {
				w = c.Weight
			}
		}
		if tc.effect {
			w *= taxonomy.EffectWeight
		}
		require.Equal(t, w, h.Weight, tc.text)
	}
	// An effect alone is too weak a cause when its cue is a weak one.
	require.Empty(t, selected(tx, "The scheduler did not restart after the reboot, causing the queue to be overloaded."))
	require.Equal(t, []string{"traffic surge"}, selected(tx, "The queue was overloaded by a sudden traffic surge."))
}

// TestHedgesPlansAndSafeguardsAreNoCause: a cue the text only suspects
// ("probably", "we think", "showed signs of", "X was suspected"), one in
// a plan or recommendation ("we will", "working on", "is a good idea"),
// and one in a sentence telling what a safeguard ensures is no cause.
func TestHedgesPlansAndSafeguardsAreNoCause(t *testing.T) {
	tx := defaultTaxonomy(t)
	requireNoCause(t, tx,
		"During the first hour the storage rack showed signs of a power outage.",
		"We think the indexer tried to load the whole backlog and ran out of memory.",
		"It seems that the resolver hit a DNS record change.",
		"The gateway was probably hit by a retry storm.",
		"The outage was most likely a DNS record change.",
		"The on-call engineer suspects a memory leak in the agent.",
		"A memory leak in the agent was suspected first.",
		"We are working on upgrading the cluster to the next release.",
		"We will be migrating the queue to the new broker version next quarter.",
		"Upgrading the database hosts is probably a good idea.",
		"The admission check ensures that a bad config change stays in the canary region.",
		"There is no reason to think that the crawler was malicious.",
		"Some updates to add-ons may have failed.",
		"So far everything looks like a race condition in the cache.",
		"A task tracks whether the new batch job may be creating lock contention.",
		// An action item in the imperative is a plan.
		"Introduce load shedding so that workers which run out of memory reject new work.",
		// Log text: what a log said is no cause.
		"There were many deadlock warnings in the scheduler log.",
	)
	// Stated outright, the same causes count.
	require.Equal(t, []string{"memory exhaustion"},
		selected(tx, "The indexer tried to load the whole backlog and ran out of memory."))
	require.Equal(t, []string{"configuration change"},
		selected(tx, "A bad config change reached the canary region and took it down."))
	require.Equal(t, []string{"software bug"}, selected(tx, "A deadlock in the scheduler stopped every job."))
}

// TestMovingMachinesIsNoUpgrade: migrating machines, workloads or data to
// other hosts upgrades nothing; migrating a platform to a new version
// still names an upgrade.
func TestMovingMachinesIsNoUpgrade(t *testing.T) {
	tx := defaultTaxonomy(t)
	require.Empty(t, selected(tx, "On Monday the operator migrated four instances to the rebuilt host."))
	require.Empty(t, selected(tx, "The team migrated the busiest shards from the old rack overnight."))
	require.Empty(t, selected(tx, "Later the affected instances were all migrated to a healthy host."))
	require.Equal(t, []string{"upgrade"}, selected(tx, "On Monday the operator started the migration of the cluster to the new major version."))
}

// TestRound2CauseCues: power that was lost, a process using too much
// memory, and a change to something however long its name, blamed by the
// sentence, name their causes; a change that was deployed is the deploy's.
func TestRound2CauseCues(t *testing.T) {
	tx := defaultTaxonomy(t)
	require.Equal(t, []string{"power failure"}, selected(tx, "Power was lost to two racks of storage servers in the hall."))
	require.Equal(t, []string{"memory exhaustion"}, selected(tx, "The consumer process was killed for using too much memory."))
	require.Equal(t, []string{"configuration change"},
		selected(tx, "A change to the default logging level of every search frontend host caused a traffic surge on the log cluster."))
	require.Equal(t, []string{"configuration change"},
		selected(tx, "Schema changes made to improve the speed of the nightly reporting jobs caused timeouts."))
	require.NotContains(t, selected(tx, "A change to the session handling of the login frontend was deployed and then caused logouts."),
		"configuration change")
}

// TestMoreCauseCues: load beyond what a component could handle, expensive
// queries, a collector thrashing, a resource used up, a regular
// expression backtracking, a roll-out of a dotted version that broke
// something, a change named as the cause, and a disk named far from its
// failure name their causes.
func TestMoreCauseCues(t *testing.T) {
	tx := defaultTaxonomy(t)
	for text, want := range map[string]string{
		"Order volume grew beyond what the billing writer could handle.":                     "traffic surge",
		"We sent more events to the queue than one consumer could handle.":                   "traffic surge",
		"The metrics store slowed to a crawl under large queries from one dashboard.":        "traffic surge",
		"The indexing node was caught in a GC death spiral and stopped answering.":           "memory exhaustion",
		"The bulk copy used up all the bandwidth of the archive host.":                       "resource exhaustion",
		"The log parser stalled on long lines because its regex suffered from backtracking.": "software bug",
		"Roll out of v2.3 to the second group broke logins.":                                 "deploy",
		"The root cause was a change thought to be harmless.":                                "configuration change",
		"A single disk in one of the two storage servers of the archive cluster failed.":     "hardware",
		"During the rollout we forgot to add the retry flag to the mailer config.":           "configuration change",
		"At noon a change was pushed out which dropped the legacy session handler.":          "deploy",
	} {
		require.Equal(t, []string{want}, selected(tx, text), text)
	}
}

// TestFailedToUpdateIsNoBadUpgrade: hosts that failed to update during a
// deploy only missed it; a failed upgrade judges the upgrade.
func TestFailedToUpdateIsNoBadUpgrade(t *testing.T) {
	tx := defaultTaxonomy(t)
	require.NotContains(t, selected(tx, "Two hosts failed to update during the deploy of the new branch."), "bad upgrade")
	require.Equal(t, []string{"bad upgrade"}, selected(tx, "A failed upgrade of the broker left the cluster down."))
	require.Equal(t, []string{"security"}, selected(tx, "A malicious crawler hammered the search API."))
}

// A patch or faulty change carried by configuration management changes
// configuration, not code: it is no deploy.
func TestConfigurationPatchIsNoDeploy(t *testing.T) {
	tx := defaultTaxonomy(t)
	require.Equal(t, []string{"configuration change"},
		selected(tx, "The scheduler stopped after a faulty puppet patch was merged on the control host."))
	require.Equal(t, []string{"configuration change"},
		selected(tx, "The patch left out one host group, which caused the firewall ACLs to render as empty lists."))
	// A patch of code that broke something is still the deploy's.
	require.Equal(t, []string{"deploy"},
		selected(tx, "The patch to the renderer introduced a crash on empty pages."))
	require.Equal(t, []string{"bad deploy"},
		selected(tx, "The renderer crashed after a faulty patch was merged."))
}

// "Dependency on" relates two components; it tells of no dependency that
// failed.
func TestDependencyOnIsNoDependencyFailure(t *testing.T) {
	tx := defaultTaxonomy(t)
	require.Empty(t, selected(tx, "The agent packages were removed due to a dependency on the older runtime."))
	require.Equal(t, []string{"dependency"}, selected(tx, "Uploads failed due to a payment dependency."))
}

// A fibre cut written as one word ("Fibercut", a title's compound) or
// hyphenated is a fibre cut.
func TestFibreCutCompound(t *testing.T) {
	tx := defaultTaxonomy(t)
	for _, text := range []string{"Fibercut near the river crossing", "A fibre-cut isolated the edge site."} {
		require.Equal(t, []string{"network failure"}, selected(tx, text), text)
	}
}

// A sentence telling what is to be done, or what would have been, names
// no cause: an imperative item ("Fix the ..."), a need ("We need to
// ..."), a counterfactual ("Had the ... been ..."), a purpose ("to prevent
// ...").
func TestRemediationSentencesAreNoCause(t *testing.T) {
	tx := defaultTaxonomy(t)
	requireNoCause(t, tx,
		"Fix the memory leak in the thumbnail renderer.",
		"Review the connection limit on the proxy tier.",
		"• Need to alert before the spool disk is running out of space.",
		"We need to rework the importer to avoid exhausting the allocator pool.",
		"Had this feature flag change been staged, the outage would have been shorter.",
		"More shards were added to prevent resource exhaustion on the index hosts.",
	)
	// The same cues told as what happened count.
	require.Equal(t, []string{"memory exhaustion"}, selected(tx, "A memory leak in the thumbnail renderer took it down."))
}

// Undetermined reads a statement that the incident's cause is unknown,
// not the unknown cause of a named failure.
func TestUndeterminedCause(t *testing.T) {
	tx := defaultTaxonomy(t)
	for _, text := range []string{
		"The cause is still unknown.",
		"The ultimate cause of the outage remains unclear.",
		"It is not yet known what caused the stall.",
		"We could not determine the root cause.",
		"No root cause was found.",
		"The root cause has not been identified yet.",
	} {
		require.True(t, tx.Undetermined(text), text)
	}
	for _, text := range []string{
		"The cause of the router failure is unknown.",
		"We could determine the root cause.",
		"The cause was a full disk.",
		"Because the cache was cold, the database was overloaded.",
	} {
		require.False(t, tx.Undetermined(text), text)
	}
}

// A cue in a clause after the reason the sentence gives ("Because ...,
// ...") is an effect of that reason: it weighs half.
func TestCueAfterAReasonIsAnEffect(t *testing.T) {
	tx := defaultTaxonomy(t)
	text := "During the event, because the control plane lacked the state data, the balancers were improperly configured."
	hits := tx.Find(text, nil)
	require.NotEmpty(t, hits)
	for _, h := range hits {
		require.True(t, h.Effect, h.Cue)
	}
	// The reason itself is no effect.
	hits = tx.Find("The balancers failed because of an incorrect configuration.", nil)
	require.NotEmpty(t, hits)
	require.False(t, hits[0].Effect)
}

// Something a person ran or deleted by accident judges the cause outright:
// it outranks configuration cues that describe what followed.
func TestAccidentalActionIsOperatorError(t *testing.T) {
	tx := defaultTaxonomy(t)
	require.Equal(t, []string{"operator error"}, selected(tx,
		"The state table was emptied by a cleanup job that was inadvertently run against production. "+
			"The balancers then had an incorrect configuration. We reverted the incorrect configuration."))
	// Code that did it by mistake is no person's slip.
	for _, h := range tx.Find("The migration code mistakenly dropped the links table.", nil) {
		require.False(t, h.Explicit && h.Mode == "operator error", h.Cue)
	}
}

// An accidental action named as a noun ("an accidental deletion of ...")
// judges the cause as the verb does; a shortage that only added
// complications weighs as an effect, however often it is named.
func TestAccidentOutweighsTheComplication(t *testing.T) {
	tx := defaultTaxonomy(t)
	text := "An accidental execution of a cleanup command removed every worker from the pool. " +
		"The address starvation in the subnet resulted in further complications. " +
		"Pods were starved of addresses for an hour."
	require.Equal(t, []string{"operator error"}, selected(tx, text))
	hits := tx.Find("The address starvation in the subnet resulted in further complications.", nil)
	require.NotEmpty(t, hits)
	require.True(t, hits[0].Effect)
}

// A latent defect that something triggered is the cause its sentence
// names, not an effect of what triggered it.
func TestTriggeredBugIsNoEffect(t *testing.T) {
	tx := defaultTaxonomy(t)
	hits := tx.Find("Requests from a batch tenant that triggered a latent bug which caused a flood of internal operations.", nil)
	var bug bool
	for _, h := range hits {
		if h.Mode == "software bug" {
			bug = true
			require.False(t, h.Effect, h.Cue)
		}
	}
	require.True(t, bug)
	// What a bug caused is still its effect.
	for _, h := range tx.Find("The bug corrupted the index, which then caused a deadlock.", nil) {
		if h.Cue == `\b(deadlock\w*|race condition\w*)\b` {
			require.True(t, h.Effect)
		}
	}
}

// A step someone forgot judges the cause outright: a person's slip, which
// outranks the symptom it led to; a forgotten setting is a configuration
// change's.
func TestForgottenStepIsOperatorError(t *testing.T) {
	tx := defaultTaxonomy(t)
	require.Equal(t, []string{"operator error"}, selected(tx,
		"The cache hosts had their disk filled up overnight. We forgot to re-enable replication after the switchover."))
	require.NotContains(t, selected(tx, "The operator forgot to update the timeout setting on the proxy."), "operator error")
}

// A latent issue, problem or flaw is a defect that waited for its trigger.
func TestLatentIssueIsASoftwareBug(t *testing.T) {
	tx := defaultTaxonomy(t)
	require.Equal(t, []string{"software bug"}, selected(tx, "The scheduler hit a latent issue in its lease renewal logic."))
	require.Equal(t, []string{"software bug"}, selected(tx, "The controller encountered a latent problem in its quota logic."))
}

// A flood of log spam is what a defect looked like, not load; a flood of
// requests still is load.
func TestFloodOfLogSpamIsNoTrafficSurge(t *testing.T) {
	tx := defaultTaxonomy(t)
	require.Empty(t, selected(tx, "The new parser code unleashed a flood of \"PHP notice\" logspam."))
	require.Empty(t, selected(tx, "The proxies wrote a flood of warnings to the journal."))
	require.Equal(t, []string{"traffic surge"}, selected(tx, "A flood of requests reached the search cluster."))
}

// A shared platform service that failed, and a provider answering with bad
// data, are failed dependencies; a service that "experienced a
// disruption" is the incident itself.
func TestSharedServiceAndProviderFailuresAreDependencies(t *testing.T) {
	tx := defaultTaxonomy(t)
	for _, text := range []string{
		"The internal secrets management service suffered a failure at 02:00, and every region lost its storage volumes.",
		"The edge proxies stapled bad responses from the certificate authority for an hour.",
		"The vendor was sending OCSP responses with expired signatures.",
	} {
		require.Equal(t, []string{"dependency"}, selected(tx, text), text)
	}
	require.Empty(t, selected(tx, "The internal blob storage service experienced a service disruption for four hours."))
}

// Configuration files deployed in the wrong order, or one that should have
// gone out before the others, broke the service by configuration; so did
// a setting lost to a typo.
func TestConfigurationOrderAndTypo(t *testing.T) {
	tx := defaultTaxonomy(t)
	for _, text := range []string{
		"The settings files were deployed in the wrong order.",
		"The list of disabled wikis should have been synced before the other config files.",
		"The timeout setting was not passed through from the settings file because of a typo.",
		"A deploy fixed the configuration setting typo.",
	} {
		require.Equal(t, []string{"configuration change"}, selected(tx, text), text)
	}
	// In what went on, the configuration file deploy order outweighs the
	// memory usage the timeline saw after it.
	require.Equal(t, []string{"configuration change"}, selected(tx,
		"At 19:45 cache memory usage started spiking. The list of disabled wikis should have been synced before the other "+
			"config files, and it is hard to define the proper order for deploying the configuration files."))
}

// "Because of an operator mistake" names the cause: operator error is then
// among the causes the text names, and outweighs a weaker one a
// root-cause sentence mentions in passing.
func TestOperatorMistakeNamedAsTheReason(t *testing.T) {
	tx := defaultTaxonomy(t)
	text := "The root cause was a cache restart run in a zone drained during network maintenance. " +
		"Because of an operator mistake, the restart ran on every cache host at once."
	require.Equal(t, []string{"operator error"}, selected(tx, text)[:1])
}

// Load from a named client is a traffic surge, not a capacity problem.
func TestOverloadedByAClientIsATrafficSurge(t *testing.T) {
	tx := defaultTaxonomy(t)
	require.Equal(t, []string{"traffic surge"}, selected(tx, "The public query endpoint was overloaded by a bot."))
}

// An update of the system software under a service is an upgrade, unless
// the sentence tells it was the remedy.
func TestOperatingSystemUpdateIsAnUpgrade(t *testing.T) {
	tx := defaultTaxonomy(t)
	require.Equal(t, []string{"upgrade"}, selected(tx, "A regular operating system (OS) update was deployed to the gateway hosts."))
	require.Equal(t, []string{"software bug"}, selected(tx,
		"A bug in the kernel of the new hosts slowed the guests. A kernel update and a reboot resolved the problem."))
	for _, h := range tx.Find("A kernel update and a reboot resolved the problem.", nil) {
		require.True(t, h.Effect, h.Cue)
	}
}

// A negation written with a typographic apostrophe negates as one written
// with a straight apostrophe.
func TestTypographicApostropheNegates(t *testing.T) {
	tx := defaultTaxonomy(t)
	requireNoCause(t, tx, "We didn\u2019t see a DoS attack from the scanner.", "The certificate hadn\u2019t expired.")
}

// Maintenance that exposed a flaw in the network's design is a network
// cause, not the hardware failure it was not.
func TestNetworkDesignFlaw(t *testing.T) {
	tx := defaultTaxonomy(t)
	require.Equal(t, []string{"network"}, selected(tx, "A line card restart exposed a flaw in the site's network design."))
}

// Connection pools that "max out" ran out of connections.
func TestConnectionPoolsMaxingOut(t *testing.T) {
	tx := defaultTaxonomy(t)
	require.Equal(t, []string{"connection pool exhaustion"}, selected(tx,
		"A slow report query caused the client connection pools to max out on the ledger database."))
	require.Empty(t, selected(tx, "The client connection pools did not max out during the failover."))
}

// A disk filling up counts with a short phrase between ("disks on most of
// the cache nodes filling up"), and not when it was not filling up.
func TestDisksOnManyNodesFillingUp(t *testing.T) {
	tx := defaultTaxonomy(t)
	require.Equal(t, []string{"disk full"}, selected(tx,
		"Debug logging led to disks on about half of the render nodes filling up."))
	require.Empty(t, selected(tx, "The disks on the render nodes were not filling up."))
}

// A room that got too warm or too humid is a cooling failure; the
// temperature of a forecast or of a CPU that stayed normal is none.
func TestTemperatureAndHumidityRiseIsCooling(t *testing.T) {
	tx := defaultTaxonomy(t)
	for _, text := range []string{
		"The hall saw an increase in outside air temperature that tripped the chillers' controls.",
		"The humidity increase made the controllers call for more cooling.",
		"Staff worked to bring down the escalating humidity in the server room.",
	} {
		require.Equal(t, []string{"power or cooling"}, selected(tx, text), text)
	}
	require.Empty(t, selected(tx, "The weather service reported the temperature for each region."))
	require.Empty(t, selected(tx, "There was no increase in room temperature during the event."))
}

// The cause placed in a provider or a carrier is a dependency's; a resource
// provider is a part of the platform.
func TestCauseInAProviderIsADependency(t *testing.T) {
	tx := defaultTaxonomy(t)
	for _, text := range []string{
		"This issue was due to a 3rd party messaging provider which was dropping texts.",
		"The issue was in a telecom carrier, and it hit other customers of the authority too.",
	} {
		require.Equal(t, []string{"dependency"}, selected(tx, text), text)
	}
	require.Empty(t, selected(tx, "Deletes failed because of the compute resource provider."))
	require.Empty(t, selected(tx, "The login page lists each identity provider the tenant trusts."))
}

// A service that failed because of an underlying service's issue had a
// failed dependency; an underlying network issue is the network's, and an
// underlying platform issue names none.
func TestUnderlyingServiceIssueIsADependency(t *testing.T) {
	tx := defaultTaxonomy(t)
	require.Equal(t, []string{"dependency"}, selected(tx, "Engineers found that the errors were caused by an underlying Blob Storage issue."))
	require.Equal(t, []string{"network failure"}, selected(tx, "Requests failed due to an underlying networking issue."))
	require.Empty(t, selected(tx, "Engineers are investigating the underlying cause of the storage errors."))
	// A vague platform issue names no service.
	require.Empty(t, selected(tx, "The timeouts were caused by an underlying platform issue."))
}

// A component that did not handle a case it met, a problem in the
// implementation, and a failed assertion are defects.
func TestUnhandledCasesAndAssertionsAreBugs(t *testing.T) {
	tx := defaultTaxonomy(t)
	for _, text := range []string{
		"When the gateway failed over, the switch was not properly handled by the metrics agent.",
		"The agent did not correctly detect that its endpoint had moved.",
		"Due to an issue in the implementation, the new change reset every stored image.",
		"The database process aborted after an assertion failure in the lock manager.",
	} {
		require.Equal(t, []string{"software bug"}, selected(tx, text), text)
	}
	require.Empty(t, selected(tx, "The agent will properly handle a moved endpoint from the next release."))
	require.Empty(t, selected(tx, "The operators handled the failover correctly."))
	require.Empty(t, selected(tx, "There was no problem in the implementation of the parser."))
}

// A network device that became unhealthy or malfunctioned failed; a
// backend service that became unhealthy names no cause.
func TestUnhealthyNetworkDeviceIsANetworkFailure(t *testing.T) {
	tx := defaultTaxonomy(t)
	require.Equal(t, []string{"network failure"}, selected(tx,
		"A backend network device became unhealthy, and traffic was not rerouted."))
	require.Empty(t, selected(tx, "Instances of a backend service became unhealthy, preventing requests from completing."))
}

// Demand for an expensive query loads a backend, however many words name
// the query.
func TestExpensiveQueryNamedInWords(t *testing.T) {
	tx := defaultTaxonomy(t)
	require.Equal(t, []string{"traffic surge"}, selected(tx,
		"External demand for an expensive search API query slowed the API servers."))
	require.Empty(t, selected(tx, "The expensive dashboard was rebuilt to query the API less often."))
}
