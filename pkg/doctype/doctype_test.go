package doctype_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/pkg/doctype"
)

func TestDocTypesResolveAndInfer(t *testing.T) {
	d := doctype.Default()
	pm := "Summary: checkout was down. Impact: customers could not pay. Root cause: an expired certificate. " +
		"Timeline: 10:02 UTC alerted. Resolution: the certificate was renewed."
	for _, tc := range []struct {
		docType, text string
		want          doctype.Decision
	}{
		{"incident", "anything", doctype.Decision{Type: "incident"}},
		{"Incident", "anything", doctype.Decision{Type: "incident"}},
		{"postmortem", "anything", doctype.Decision{Type: "incident"}},
		{"post-mortem", "anything", doctype.Decision{Type: "incident"}},
		{"runbook", "anything", doctype.Decision{Type: "runbook"}},
		{"", pm, doctype.Decision{Type: "incident", Inferred: true}},
		{"", "How to rotate the signing keys: run the script, then check the dashboard.", doctype.Decision{Type: "document", Inferred: true}},
	} {
		got, err := d.Resolve(tc.docType, "", tc.text)
		require.NoError(t, err, tc.docType)
		require.Equal(t, tc.want, got, "%q %q", tc.docType, tc.text)
	}
	_, err := d.Resolve("banana", "", pm)
	require.ErrorIs(t, err, doctype.ErrUnknown)

}

// Incident reports written as prose, with few of the postmortem parts by
// name, are inferred as incidents; ordinary wiki pages that talk of
// failures that may happen stay documents.
func TestInferReadsIncidentReportsWithoutHeadings(t *testing.T) {
	for _, tc := range []struct {
		name, title, text, want string
	}{
		{"timeline and follow-ups", "20230114-Search",
			"The search cluster slowed down for most users.\n" +
				"• 09:12 latency rises on the search dashboard\n" +
				"• 09:31 the search service is restarted\n" +
				"What went well?\n• the dashboard showed the slow node\n" +
				"• Task T4242 - alert on search latency", "incident"},
		{"called an outage in its title", "20230301-QueueOutage",
			"The job queue stopped processing jobs for two hours after a host was rebooted.", "incident"},
		{"first heading names the incident", "gq-231",
			"# Storage Incident #231\n\nDate: 03/02/2023\n\nRequests to the storage API experienced elevated error rates for 40 minutes.", "incident"},
		{"prose with a cause label", "20220907-Mail",
			"At 14:05 UTC outgoing mail was queued on both relays.\n" +
				"The cause: a full disk on the spool partition; errors were logged for every message.", "incident"},
		{"report headings", "Lost logs",
			"# Lost logs\n\n## Summary\n\nLogs were not shipped for a day.\n\n## Timeline\n\n| 2023-01-05 11:25 | change applied |\n\n" +
				"## Contributing Factors\n\n- no alert on shipping\n\n## Action Items\n\n- add an alert", "incident"},
		{"overview with a summary heading", "Log shipping",
			"# Log shipping\n\n## Summary\n\nEvery node runs a shipper that sends logs to the store.\n\n## Usage\n\n" +
				"Add the label to your namespace. If shipping failed, check the shipper's errors.", "document"},
		{"dated narrative", "20221104-Uploads",
			"Uploads to the media store failed for an hour: the upload workers could not reach the store after its address changed.", "incident"},
		{"dated meeting notes", "2022-11-04 ops meeting",
			"Attendees: the platform team. We discussed the storage migration plan and the on-call rota; the error budget report is due next week.", "document"},
		{"how-to", "Restarting the job queue",
			"How to restart the job queue: log in to the queue host, run the restart script and check the dashboard. " +
				"If errors appear, see the logs. Backups run at 02:00 UTC every day.", "document"},
		{"service overview", "Search service",
			"The search service indexes every page and answers queries from the web tier. It runs on six hosts behind " +
				"the load balancer; an alert pages the on-call engineer when latency is high or the service is unavailable. " +
				"Incident response for it is described on the on-call page.", "document"},
		{"incident response guide", "Incident response",
			"When an outage is declared, the incident commander opens a channel, pages the owners and writes the " +
				"status updates. Action items go to the tracker after the incident review.", "document"},
		{"empty page", "20230101-Train", "There is currently no text in this page.", "document"},
		// A dated report that tells of a failure in the past tense by its
		// symptoms names no outage word, and is one.
		{"dated report of symptoms", "20230212-Renderer",
			"On Sunday the render workers were unable to keep up and CPU load stayed high. A restart did not seem to help; " +
				"the workers got stuck on one huge page until a hotfix skipped it.", "incident"},
		{"dated report of lost writes", "20230305-Ingest",
			"Events were not written to the store for two hours because the consumer ran out of memory and got killed.", "incident"},
		// A clock time inside an ISO date-time is a timeline's time, and
		// "root causes" names the cause part as "root cause" does.
		{"times in ISO date-times", "20230110-Metrics",
			"Metrics from the affected hosts were missing between 2023-01-10T02:00 and 2023-01-10T09:00; the collector failed after an upgrade.", "incident"},
		{"root causes, plural", "20230111-Metrics",
			"Metrics from the affected hosts were missing at 02:00 UTC. Several issues at once made finding the root causes slow.", "incident"},
		// Lag, a used-up resource, a process that died or flapped and a
		// service that stopped serving are symptoms too.
		{"dated report of lag", "20230120-Storage",
			"Shared storage lagged for every build host when a large copy used up all the bandwidth.", "incident"},
		{"dated report of a stopped service", "20230121-Scoring",
			"The scoring service stopped serving requests for two hours because its cache ran out of disk space.", "incident"},
		{"dated report of a dying process", "20230122-Importer",
			"A schema change caused the importer to die on every batch, and it flapped for a day before the field was added.", "incident"},
		// A cause stated in the past tense says something happened.
		{"dated report that states its cause", "20230125-Builds",
			"The cause was a settings change that removed the cache directory; builds broke for everyone until it was restored.", "incident"},
		// "This outage" tells of one that happened.
		{"report of this outage", "20230126-Queue",
			"Client jobs never reached the queue during this outage; server jobs went through.", "incident"},
		// A timeline entry may start with a month's name and a day.
		{"timeline dated by month names", "Release branch mix-up",
			"The root cause: a merge from the main branch into the release branch.\n" +
				"• Mar 06 13:18 UTC - the change is merged into the release branch\n" +
				"• Mar 06 14:46 UTC - a revert is merged", "incident"},
		// A dated title that ends by naming a failure is an incident's,
		// even when the page has no text.
		{"dated failure title, empty page", "20230105-cache-saturation", "There is currently no text in this page.", "incident"},
		{"dated CamelCase failure title", "20230106-SearchSlowdown", "", "incident"},
		{"dated title, service down", "20230107-search API down", "", "incident"},
		// An incident tracker's id in the title names an incident.
		{"incident id in the title", "INC-207",
			"INC-207 (Mar 3): the queue workers stopped at 10:02 UTC and jobs piled up.", "incident"},
		// How long it lasted says something happened.
		{"incident id and a duration", "INC-208",
			"INC-208 (Mar 4): the upload service refused every file for 14 minutes until the limit was raised.", "incident"},
		// Symptom words in a dated plan, or in an undated page, are not.
		{"dated plan", "20230401-Capacity",
			"Next quarter we add two cache hosts so that latency stays low when load is high.", "document"},
		{"undated tuning notes", "Renderer tuning",
			"The render workers were unable to keep up when a page is huge; the limit below stops them from getting stuck.", "document"},
		{"undated note of lag", "Replica lag",
			"Replicas lagged behind the primary when a large copy used up the bandwidth; throttle copies with the limit below.", "document"},
		{"dated upgrade plan", "20230402-Upgrade",
			"Before the upgrade we check that no process died or flapped on the staging hosts; the rollout starts next week.", "document"},
		{"undated answer that states a cause", "Slow builds",
			"Why were builds slow last year? The cause was a small cache, which is larger now.", "document"},
		{"how-to naming a usual cause", "20230403-Builds",
			"If builds are slow, the cause is usually a small cache: raise its size and the builds speed up.", "document"},
		{"status page guide", "Status page",
			"Post an update on the status page every 30 minutes during an outage, and link the incident channel.", "document"},
		{"release schedule", "Release schedule",
			"• Mar 06 13:00 UTC - the release branch is cut\n• Mar 07 13:00 UTC - the release goes to every site", "document"},
		{"dated plan about a failure", "20230108-Disk saturation plan", "We add disks next quarter.", "document"},
		{"dated page on scaling down", "20230109-Workers scale down", "The worker pool shrinks to four hosts at night.", "document"},
		{"undated failure title", "Cache saturation", "There is currently no text in this page.", "document"},
		{"company name in capitals", "Vendor notes",
			"ACME INC 2023 contract: support answers at 09:00 UTC on workdays.", "document"},
		{"runbook with a wait", "Restarting the queue",
			"Stop the workers, wait for 10 minutes, then start them again. Incidents with the queue go to its channel.", "document"},
		{"cache settings", "Cache settings",
			"Responses are cached for 5 minutes; incident pages are never cached.", "document"},
	} {
		require.Equal(t, tc.want, doctype.Infer(tc.title, tc.text), tc.name)
	}
}

// A first line names its document an incident only when it reads as a
// heading (a Markdown heading, or a short line that is no sentence), and
// a title word counts only at a word's start: a note whose first sentence
// mentions an outage, or a title with "coincidental" in it, names none.
func TestInferReadsTheIncidentWordOnlyInAHeading(t *testing.T) {
	past := "The cache was unavailable for most users; clients retried and the pages came back."
	for _, tc := range []struct {
		name, title, text, want string
	}{
		{"short first line", "Search notes", "Search outage on the first of March\n\n" + past, "incident"},
		{"Markdown heading", "Search notes", "# Notes on the search outage of the first of March, written by the team\n\n" + past, "incident"},
		{"first line is a sentence", "Cache notes", "Notes on handling an outage of the cache tier.\n\n" + past, "document"},
		{"long first line", "Cache notes",
			"Notes on handling an outage of the cache tier kept by the storage team for the new hires on call\n\n" + past, "document"},
		{"word inside another word", "Coincidental cache restarts", past, "document"},
		{"CamelCase title", "CacheOutage", past, "incident"},
	} {
		require.Equal(t, tc.want, doctype.Infer(tc.title, tc.text), tc.name)
	}
}

// Dated reports of a past failure told by what went on ("was dropping
// events"), by what was wrong ("there were two things wrong with it") with
// the 404s users got, or by what it affected are incidents; vandalism
// named at a dated title's end is one too. Undated, or in the present
// tense, the same words are not.
func TestInferReadsDatedReportsOfWhatWentOn(t *testing.T) {
	for _, tc := range []struct {
		name, title, text, want string
	}{
		{"was dropping events", "20230310-Collector", "The collector code was dropping events now and then from Monday to Thursday.", "incident"},
		{"is dropping events by design", "20230310-Collector", "The collector code is dropping events it cannot parse, by design.", "document"},
		{"things wrong, 404s", "20230311-Proxies",
			"At 10:20 UTC a change to the proxy package was merged. There were two things wrong with it, and readers were served 404s until it was reverted.", "incident"},
		{"a question on what was wrong", "20230311-Proxies",
			"At 10:20 UTC each day the FAQ is updated. Q: what was wrong with my request? A: the path is unknown.", "document"},
		{"what it affected", "20230313-Validation",
			"For half a day most events did not validate. The issue affected events sent by browsers.", "incident"},
		{"what it affected, undated", "Validation",
			"For half a day most events did not validate. The issue affected events sent by browsers.", "document"},
		{"dated vandalism title", "20230315-wiki-vandalism", "This page is currently a draft.", "incident"},
		{"undated vandalism title", "Wiki vandalism", "This page is currently a draft.", "document"},
	} {
		require.Equal(t, tc.want, doctype.Infer(tc.title, tc.text), tc.name)
	}
}
