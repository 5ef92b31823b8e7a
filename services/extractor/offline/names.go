package offline

import (
	"regexp"
	"strings"
	"unicode"
)

// Name discovery: names no gazetteer knows, found from their shape alone
// (no corpus statistics): code-like identifiers ending in a head noun
// ("rate-limiter", "orders-db", "checkout-api"), host names ("db1005",
// "cr2-esams"), CamelCase names ("MultiWriteBagOStuff"), capitalised words
// or acronyms before a head noun ("DNS resolver", "Cert Manager") and
// acronyms a document uses more than once. Stop lists keep out ordinary
// words, adjectives, URL query parameters, SQL and quoted log lines.

// DefaultComponentHeads are head nouns of infrastructure component names.
func DefaultComponentHeads() []string {
	return []string{"agent", "balancer", "broker", "brokers", "bus", "cache", "collector", "controller", "daemon",
		"database", "db", "exporter", "flag", "flags", "indexer", "ingress", "limiter", "manager",
		"operator", "proxy", "queue", "registry", "resolver", "router", "scheduler", "server",
		"shipper", "sidecar", "store", "webhook"}
}

// DefaultServiceHeads are head nouns of service names.
func DefaultServiceHeads() []string {
	return []string{"api", "service", "svc", "gateway", "worker", "frontend", "backend"}
}

// TypeHost is the entity type of discovered host and device names.
const TypeHost = "host"

// componentFinder finds names shaped like infrastructure components.
type componentFinder struct {
	ident, host *regexp.Regexp
	heads       map[string]string // head noun -> entity type
}

func newComponentFinder(components, services []string) *componentFinder {
	h := make(map[string]string, len(components)+len(services))
	for _, w := range components {
		h[strings.ToLower(w)] = "component"
	}
	for _, w := range services {
		h[strings.ToLower(w)] = "service"
	}
	return &componentFinder{
		ident: regexp.MustCompile(`\b[A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)+\b`),
		// db1005, mw1234, labstore1005, cr2-esams, asw-d2-sdtpa,
		// ip-10-0-32-54: lower-case letters with digits, maybe dashed.
		host:  regexp.MustCompile(`\b[a-z]{2,}[0-9]{3,}(?:\.[a-z]+)*\b|\b[a-z]+[0-9]+(?:-[a-z0-9]+)+\b|\b[a-z]+(?:-[a-z0-9]+)*-[a-z]*[0-9][a-z0-9]*(?:-[a-z0-9]+)*\b`),
		heads: h,
	}
}

type span struct {
	start, end int
	text, typ  string
}

// functionWord reports whether w cannot be part of a discovered name:
// determiners, prepositions and prefixes that make "in-service",
// "self-service" or "service-to-service" phrases, not names.
func functionWord(w string) bool {
	switch strings.ToLower(w) {
	case "the", "a", "an", "this", "that", "our", "each", "every", "all", "any", "its", "their", "new", "old",
		"one", "no", "some", "which", "when", "if", "web", "in", "to", "of", "on", "at", "by", "for", "from",
		"with", "self", "multi", "non", "cross", "per", "pre", "re", "sub", "micro", "var", "de", "un", "co",
		"out", "off", "up", "down", "over", "under", "and", "or", "not", "is", "be", "as", "via", "front",
		"back", "end", "user", "customer", "internal", "external", "x", "e", "i", "my", "your":
		return true
	}
	return false
}

// adjectiveLike reports whether w reads as an adjective, adverb or verb
// form ("Intermittent", "Reducing", "Affected"), never a name's first word.
func adjectiveLike(w string) bool {
	l := strings.ToLower(w)
	if ordinaryWord(l) {
		return true
	}
	for _, suf := range []string{"ing", "ed", "ly", "ent", "ant", "ive", "al", "ous", "ful", "able", "ible", "less", "ary", "ic"} {
		if len(l) > len(suf)+2 && strings.HasSuffix(l, suf) {
			return true
		}
	}
	return false
}

// commonAcronym reports whether an upper-case word is a common acronym of
// prose, protocols, time zones or SQL rather than a system's name.
func commonAcronym(w string) bool {
	switch w {
	case "API", "APIS", "URL", "URI", "HTTP", "HTTPS", "TCP", "UDP", "DNS", "TLS", "SSL", "SSH", "FTP", "SMTP", "IMAP",
		"UTC", "GMT", "PST", "PDT", "EST", "EDT", "CET", "CEST", "BST", "IST", "JST", "AEST", "MEZ",
		"CPU", "GPU", "RAM", "SSD", "HDD", "IOPS", "NIC", "VM", "VMS", "OS", "IP", "IPV", "MTU", "BGP", "LAN", "WAN",
		"RCA", "SRE", "SLA", "SLO", "SLI", "TTL", "TTR", "MTTR", "ETA", "EOD", "FAQ", "TODO", "TBD", "FYI", "ASAP",
		"IRC", "PR", "PRS", "CI", "CD", "QA", "UAT", "PROD", "DEV", "OPS", "IT", "HR", "CEO", "CTO", "VP", "USA", "EU",
		"JSON", "YAML", "XML", "HTML", "CSS", "CSV", "SQL", "UTF", "ASCII", "ID", "IDS", "UUID", "GUID", "KB", "MB",
		"GB", "TB", "PB", "MS", "NOTE", "WARN", "INFO", "ERROR", "DEBUG", "FATAL", "CRIT", "CRITICAL", "OK", "PROBLEM",
		"RECOVERY", "WARNING", "UNKNOWN", "NOT", "AND", "OR", "THE", "FOR", "WITH", "FROM", "ALL", "NEW", "AM", "PM",
		"SELECT", "INSERT", "UPDATE", "DELETE", "CREATE", "DROP", "ALTER", "TABLE", "INDEX", "WHERE", "JOIN",
		"GROUP", "ORDER", "LIMIT", "VALUES", "INTO", "SET", "NULL", "TRUE", "FALSE", "GET", "POST", "PUT", "PATCH",
		"HEAD", "DATABASE", "CVE", "ACL", "ACLS", "RBAC", "MFA", "SSO", "VPN", "NAT", "CDN", "LB", "AZ", "AZS",
		"DC", "TOR", "PDU", "UPS", "HVAC", "SAN", "NAS", "RAID", "ECC", "DIMM", "BIOS", "IDRAC", "ILO", "IPMI",
		"UI", "UX", "CLI", "SDK", "GUI", "MVP", "POC", "KPI", "RPC", "GRPC", "REST", "SOAP", "AJAX", "CORS",
		"APAC", "EMEA", "LATAM", "AMER", "OOM", "GC", "PID", "TPS", "QPS", "RPS", "RTT", "P50", "P95", "P99", "AWS", "GCP", "EKS", "US":
		return true
	}
	return false
}

// codeState reports whether a CamelCase word is a state or status name of
// a system ("CrashLoopBackOff", "NotReady"), not a component.
func codeState(w string) bool {
	switch w {
	case "CrashLoopBackOff", "NotReady", "ImagePullBackOff", "ErrImagePull", "OOMKilled", "ContainerCreating",
		"NodeNotReady", "PodInitializing", "CreateContainerConfigError", "DeadlineExceeded", "NotFound",
		"BadRequest", "InternalServerError", "ServiceUnavailable", "GatewayTimeout", "TooManyRequests",
		"RequestIsNotValidJson", "ReadOnly", "YouTube", "JavaScript", "TypeScript", "PowerPoint", "LinkedIn",
		"WhatsApp", "iPhone", "McDonald", "PhD", "PostMortem", "PostMortems", "DevOps", "GitOps", "SecOps",
		"FinOps", "MLOps", "NoSQL", "OAuth", "TODO":
		return true
	}
	return false
}

// operationName reports whether a CamelCase word is an API operation
// ("DescribeInstances", "CreateTopic"), an error or exception class
// ("AttributeError") or a scheduler event ("FailedScheduling").
func operationName(w string) bool {
	for _, p := range []string{"Create", "Delete", "Describe", "List", "Get", "Update", "Run", "Add", "Put", "Set",
		"Validate", "Load", "Fetch", "Remove", "Start", "Stop", "Failed", "Is", "Has", "On", "Handle", "Do", "Make"} {
		if rest, ok := strings.CutPrefix(w, p); ok && rest != "" && rest[0] >= 'A' && rest[0] <= 'Z' {
			return true
		}
	}
	for _, suf := range []string{"Error", "Exception", "Type", "Errors", "Exceptions", "Event"} {
		if strings.HasSuffix(w, suf) {
			return true
		}
	}
	return false
}

// quotedSpans are the byte ranges of text inside double quotes, backticks
// or code fences: quoted error messages and log lines name no system.
func quotedSpans(text string) []span {
	var out []span
	for _, q := range []string{"```", "`", "\"", "“"} {
		closeQ := q
		if q == "“" {
			closeQ = "”"
		}
		for i := 0; i < len(text); {
			s := strings.Index(text[i:], q)
			if s < 0 {
				break
			}
			s += i + len(q)
			e := strings.Index(text[s:], closeQ)
			if e < 0 || strings.Contains(text[s:s+e], "\n\n") {
				break
			}
			out = append(out, span{start: s, end: s + e})
			i = s + e + len(closeQ)
		}
	}
	return out
}

// inURL reports whether text[s:e] is part of a URL, a path or a query
// string ("?var-service=x", "/dashboard/db/kafka-exporter").
func inURL(text string, s, e int) bool {
	if s > 0 && strings.ContainsRune("=?&/:#%.@", rune(text[s-1])) {
		return true
	}
	if e < len(text) && strings.ContainsRune("=/?&%@(", rune(text[e])) {
		return true
	}
	// A token of the same whitespace-delimited word that looks like a URL.
	ws := strings.LastIndexAny(text[:s], " \t\n(<[") + 1
	we := strings.IndexAny(text[e:], " \t\n)>]")
	if we < 0 {
		we = len(text)
	} else {
		we += e
	}
	tok := text[ws:we]
	return strings.Contains(tok, "://") || strings.HasPrefix(tok, "www.") || strings.Contains(tok, "=")
}

// wordRuns returns the byte ranges of the maximal runs of word bytes
// ([0-9A-Za-z_], what \b separates) for which keep holds: a pattern
// bounded by \b at both ends whose matches hold only word bytes matches
// exactly the whole words it matches, so it need not be searched for at
// every byte.
func wordRuns(text string, keep func(string) bool) [][]int {
	return keepRuns(text, appendRuns(nil, text, wordBytes), keep)
}

// keepRuns returns the bounds of the runs of text for which keep holds.
func keepRuns(text string, runs []run, keep func(string) bool) [][]int {
	var out [][]int
	for _, r := range runs {
		if keep(text[r.start:r.end]) {
			out = append(out, []int{r.start, r.end})
		}
	}
	return out
}

// run is a maximal run of the bytes of a text in a byteSet,
// text[start:end].
type run struct{ start, end int }

// appendRuns appends to out the runs of bytes of text in the set in, in
// order, as byteRuns finds them.
func appendRuns(out []run, text string, in *byteSet) []run {
	byteRuns(text, in, func(i, j int) { out = append(out, run{i, j}) })
	return out
}

// textRuns holds the runs of word bytes and of identifier bytes of a
// text, which the component finder walks several times each, and its
// word pairs: a unit's are found once, in storage kept from one unit to
// the next.
type textRuns struct {
	words  []run
	idents []identRun
	pairs  [][6]int
}

// identRun is a run of identifier bytes and the classes of bytes it
// holds (identClass).
type identRun struct {
	run
	holds uint8
}

// Classes of identifier bytes, as bits.
const (
	dashOrUnderscore = 1 << iota
	asciiDigit
	asciiLower
)

// identClass is the class of each byte; 0 for a byte of none.
var identClass = func() (c [256]uint8) {
	c['-'], c['_'] = dashOrUnderscore, dashOrUnderscore
	for b := '0'; b <= '9'; b++ {
		c[b] = asciiDigit
	}
	for b := 'a'; b <= 'z'; b++ {
		c[b] = asciiLower
	}
	return c
}()

// appendIdentRuns appends to out the runs of identifier bytes of text,
// as byteRuns finds them, each with the classes of its bytes: which runs
// hasDashOrUnderscore or hasDigitAndLower keeps is told from them
// without reading a run again.
func appendIdentRuns(out []identRun, text string) []identRun {
	for i := 0; i < len(text); {
		if !identBytes[text[i]] {
			i++
			continue
		}
		holds := identClass[text[i]]
		j := i + 1
		for j < len(text) && identBytes[text[j]] {
			holds |= identClass[text[j]]
			j++
		}
		out = append(out, identRun{run{i, j}, holds})
		i = j
	}
	return out
}

// byteRuns calls fn with the bounds of every maximal run of bytes of text
// in the set in, in order.
func byteRuns(text string, in *byteSet, fn func(i, j int)) {
	for i := 0; i < len(text); {
		if !in[text[i]] {
			i++
			continue
		}
		j := i + 1
		for j < len(text) && in[text[j]] {
			j++
		}
		fn(i, j)
		i = j
	}
}

// byteSet is a set of bytes: a table lookup per byte rather than a call.
type byteSet [256]bool

// bytesOf returns the set of bytes for which in holds.
func bytesOf(in func(byte) bool) *byteSet {
	var s byteSet
	for b := range s {
		s[b] = in(byte(b))
	}
	return &s
}

// wordBytes and identBytes are wordByte's and identByte's bytes.
var wordBytes, identBytes = bytesOf(wordByte), bytesOf(identByte)

func wordByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_'
}

// camelWord is a CamelCase word: CertManager, DynamoDb. Like
// acronymWord it matches whole words only (see wordRuns).
func (f *componentFinder) camelWord(w string) bool { return camelCase(w) }

// camelCase reports whether w matches ^[A-Z][a-z0-9]+(?:[A-Z]+[a-z0-9]+)+$:
// over capitals and [a-z0-9], a capital, then one of [a-z0-9], a capital
// later on, and one of [a-z0-9] last. TestCamelCaseIsTheExpression
// compares the two.
func camelCase(w string) bool {
	lowerOrDigit := func(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }
	if len(w) < 4 || w[0] < 'A' || w[0] > 'Z' || !lowerOrDigit(w[1]) || !lowerOrDigit(w[len(w)-1]) {
		return false
	}
	capital := false
	for i := 2; i < len(w); i++ {
		if c := w[i]; 'A' <= c && c <= 'Z' {
			capital = true
		} else if !lowerOrDigit(c) {
			return false
		}
	}
	return capital
}

// acronymWord is a word of 3 to 6 capital letters.
func acronymWord(w string) bool {
	if len(w) < 3 || len(w) > 6 {
		return false
	}
	for i := 0; i < len(w); i++ {
		if w[i] < 'A' || w[i] > 'Z' {
			return false
		}
	}
	return true
}

// find finds the component-shaped names of text, its runs found in tr's
// storage.
func (f *componentFinder) find(text string, tr *textRuns) []span {
	tr.words = appendRuns(tr.words[:0], text, wordBytes)
	tr.idents = appendIdentRuns(tr.idents[:0], text)
	quoted := quotedSpans(text)
	var out []span
	add := func(s span) {
		if overlapsSpans(quoted, s.start, s.end) || overlapsSpans(out, s.start, s.end) {
			return
		}
		out = append(out, s)
	}
	// An identifier has a hyphen or an underscore: runs without one are
	// not searched.
	for _, loc := range findInRunsHolding(f.ident, text, tr.idents, dashOrUnderscore) {
		s, e := loc[0], loc[1]
		// Not part of a longer dotted or slashed name (a URL, a path).
		if (s > 0 && strings.ContainsRune("./-_", rune(text[s-1]))) || (e < len(text) && strings.ContainsRune("/-_", rune(text[e]))) {
			continue
		}
		if inURL(text, s, e) {
			continue
		}
		w := text[s:e]
		parts := strings.FieldsFunc(w, func(r rune) bool { return r == '-' || r == '_' })
		typ := f.heads[strings.ToLower(parts[len(parts)-1])]
		if typ == "" || functionWord(parts[0]) || len(parts) > 1 && functionWord(parts[len(parts)-2]) {
			continue
		}
		add(span{s, e, w, typ})
	}
	for _, loc := range findInRunsHolding(f.host, text, tr.idents, asciiDigit|asciiLower) {
		s, e := loc[0], loc[1]
		if (s > 0 && strings.ContainsRune("./-_", rune(text[s-1]))) || inURL(text, s, e) || !hostName(text[s:e]) {
			continue
		}
		add(span{s, e, text[s:e], TypeHost})
	}
	for _, loc := range keepRuns(text, tr.words, f.camelWord) {
		s, e := loc[0], loc[1]
		w := text[s:e]
		if codeState(w) || operationName(w) || inURL(text, s, e) || (s > 0 && strings.ContainsRune("./-_$:", rune(text[s-1]))) {
			continue
		}
		add(span{s, e, w, "component"})
	}
	// Pairs may overlap ("The DNS resolver"): after each candidate the
	// search resumes at its second word.
	tr.pairs = appendWordPairs(tr.pairs[:0], text, tr.words)
	for _, m := range tr.pairs {
		first, head := text[m[2]:m[3]], text[m[4]:m[5]]
		// Two words are a component name only: "AWS service" is prose.
		if functionWord(first) || f.heads[strings.ToLower(head)] != "component" {
			continue
		}
		if m[0] > 0 && strings.ContainsRune("-_.", rune(text[m[0]-1])) {
			continue
		}
		// An acronym (DNS) or a capitalised name (Cert Manager), never an
		// ordinary word or an adjective ("Intermittent database"), SQL
		// ("CREATE DATABASE") or a word that only starts a sentence.
		acronym := strings.ToUpper(first) == first && len(first) >= 2
		if acronym && (commonAcronym(first) && first != "DNS" || strings.ToUpper(head) == head) {
			continue
		}
		if !acronym && (adjectiveLike(first) || startsSentence(text, m[0]) && head[0] >= 'a') {
			continue
		}
		add(span{m[0], m[1], text[m[0]:m[1]], "component"})
	}
	// Acronyms the text uses at least twice ("KIAM", "OCG"), outside SQL
	// and log lines written in capitals.
	counts := map[string]int{}
	locs := keepRuns(text, tr.words, acronymWord)
	for _, loc := range locs {
		counts[text[loc[0]:loc[1]]]++
	}
	for _, loc := range locs {
		s, e := loc[0], loc[1]
		w := text[s:e]
		if counts[w] < 2 || commonAcronym(w) || ordinaryWord(strings.ToLower(w)) || strings.IndexFunc(w, unicode.IsLetter) < 0 || inURL(text, s, e) ||
			capsNeighbour(text, s, e) {
			continue
		}
		add(span{s, e, w, "component"})
	}
	return out
}

// wordPairs returns the submatch indexes of the matches of
// `\b([A-Z][A-Za-z0-9]+) ([A-Za-z]+)\b` in text when the search resumes
// at each match's second word (matches may overlap):
// a capitalised word of ASCII letters and digits, one space, a word of
// ASCII letters. Each of its words is a whole run of word bytes (what \b
// separates), so it is found by walking the runs, each with the next,
// without the regexp.
func wordPairs(text string) [][6]int {
	return appendWordPairs(nil, text, appendRuns(nil, text, wordBytes))
}

// appendWordPairs appends to out the word pairs of text, whose runs of
// word bytes are words.
func appendWordPairs(out [][6]int, text string, words []run) [][6]int {
	prevStart, prevEnd := -1, -1
	for _, w := range words {
		i, j := w.start, w.end
		if prevEnd >= 0 && i == prevEnd+1 && text[prevEnd] == ' ' && capitalisedAlnum(text[prevStart:prevEnd]) &&
			asciiLetters(text[i:j]) {
			out = append(out, [6]int{prevStart, j, prevStart, prevEnd, i, j})
		}
		prevStart, prevEnd = i, j
	}
	return out
}

// capitalisedAlnum reports whether w is [A-Z][A-Za-z0-9]+.
func capitalisedAlnum(w string) bool {
	if len(w) < 2 || w[0] < 'A' || w[0] > 'Z' {
		return false
	}
	for i := 1; i < len(w); i++ {
		if c := w[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// asciiLetters reports whether w is [A-Za-z]+.
func asciiLetters(w string) bool {
	for i := 0; i < len(w); i++ {
		if c := w[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return w != ""
}

// hostName reports whether w is shaped like a host or network device name
// rather than a version, a region, a hash or a unit.
// findInRuns is re.FindAllStringIndex(text, -1) for a host-name
// expression: one whose matches hold only letters, digits, dots and
// hyphens and at least one digit and one lower-case letter. It runs re
// only on the maximal runs of identifier bytes ([A-Za-z0-9_.-]) that hold
// a digit and a lower-case letter: a match cannot cross a run's end, and
// at a run's end a word boundary falls as at the end of a text.
func findInRuns(re *regexp.Regexp, text string) [][]int {
	return findInRunsIf(re, text, hasDigitAndLower)
}

// hasDashOrUnderscore reports whether run holds '-' or '_'.
func hasDashOrUnderscore(run string) bool {
	for i := 0; i < len(run); i++ {
		if c := run[i]; c == '-' || c == '_' {
			return true
		}
	}
	return false
}

// hasDigitAndLower reports whether run holds an ASCII digit and an ASCII
// lower-case letter.
func hasDigitAndLower(run string) bool {
	digit, lower := false, false
	for i := 0; i < len(run); i++ {
		c := run[i]
		digit = digit || '0' <= c && c <= '9'
		lower = lower || 'a' <= c && c <= 'z'
		if digit && lower {
			return true
		}
	}
	return false
}

// findInRunsIf is re.FindAllStringIndex(text, -1) for an expression whose
// matches hold only identifier bytes ([A-Za-z0-9_.-]) and start and end
// at a word boundary: re runs on each maximal run of identifier bytes for
// which need holds (a run it skips holds no match).
func findInRunsIf(re *regexp.Regexp, text string, need func(run string) bool) [][]int {
	var out [][]int
	byteRuns(text, identBytes, func(i, j int) {
		if need(text[i:j]) {
			out = appendFound(out, re, text, i, j)
		}
	})
	return out
}

// findInRunsHolding is findInRunsIf for a need that holds of a run
// holding a byte of each class of holds (dashOrUnderscore:
// hasDashOrUnderscore; asciiDigit|asciiLower: hasDigitAndLower), idents
// the runs of identifier bytes of text.
func findInRunsHolding(re *regexp.Regexp, text string, idents []identRun, holds uint8) [][]int {
	var out [][]int
	for _, r := range idents {
		if r.holds&holds == holds {
			out = appendFound(out, re, text, r.start, r.end)
		}
	}
	return out
}

// appendFound appends to out the matches of re in text[i:j], as offsets
// into text.
func appendFound(out [][]int, re *regexp.Regexp, text string, i, j int) [][]int {
	for _, loc := range re.FindAllStringIndex(text[i:j], -1) {
		out = append(out, []int{i + loc[0], i + loc[1]})
	}
	return out
}

func identByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
}

func hostName(w string) bool {
	l := strings.ToLower(w)
	for _, p := range []string{"us-", "eu-", "ap-", "sa-", "ca-", "me-", "af-", "asia-", "europe-", "northamerica-",
		"southamerica-", "australia-", "sha", "md5", "utf", "ipv", "http", "log4", "x86", "arm64", "amd64", "win",
		"rfc", "iso", "cve-", "wmf-", "php", "python", "java", "node", "go1", "v1", "v2", "t2", "t3", "m5", "c5", "r5",
		"covid", "top", "last", "first", "pre-", "post-", "non-", "re-", "co-", "on-", "in-", "the-", "gen"} {
		if strings.HasPrefix(l, p) {
			return false
		}
	}
	digits := 0
	for _, r := range l {
		if unicode.IsDigit(r) {
			digits++
		}
	}
	return digits > 0 && digits < len(l)-1
}

// capsNeighbour reports whether the word at text[s:e] stands next to
// another upper-case word: a line of SQL or a shouted log line.
func capsNeighbour(text string, s, e int) bool {
	next := strings.TrimLeft(text[e:], " ")
	i := 0
	for i < len(next) && next[i] >= 'A' && next[i] <= 'Z' {
		i++
	}
	if i >= 2 {
		return true
	}
	prev := strings.TrimRight(text[:s], " ")
	j := len(prev)
	for j > 0 && prev[j-1] >= 'A' && prev[j-1] <= 'Z' {
		j--
	}
	return len(prev)-j >= 2
}

func startsSentence(text string, i int) bool {
	j := i - 1
	for j >= 0 && (text[j] == ' ' || text[j] == '\t') {
		j--
	}
	return j < 0 || strings.ContainsRune(".!?\n:#|*", rune(text[j]))
}

func overlapsSpans(ss []span, start, end int) bool {
	for _, s := range ss {
		if s.start < end && start < s.end {
			return true
		}
	}
	return false
}
