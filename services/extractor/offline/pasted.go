package offline

import (
	"regexp"
	"strings"
	"sync"
)

// Pasted text: lines a postmortem copies from a chat channel, a log, a
// monitoring alert or a stack trace. What they say is what someone typed
// or what a program printed while the incident went on, not the
// postmortem's account of its cause, so a failure cue in them does not
// count (as in a quoted error message).
var (
	// lineStart is a line's bullet and timestamps: "• ", "[12:34:56] ",
	// "2016-07-08 01:59 ", "07/08/16 01:59 - ".
	lineStart = `^[ \t]*(?:[•*+\-][ \t]*)?(?:(?:\[[^\]\n]{1,32}\]|\d[\d:/.,TZ\-]*|UTC|GMT)[ \t]*[:\-–]?[ \t]*){0,3}`

	// pastedLine matches one whole line (no newline in it): it is run on
	// each line apart, anchored at its start, which is many times faster
	// than a multi-line search of the whole text (Go's regexp tries a
	// pattern without a literal prefix at every byte).
	pastedLine = sync.OnceValue(func() *regexp.Regexp {
		alts := []string{
			// A chat transcript line: "<nick> text" or "* nick does" at
			// the start, after the timestamps ("[12:34] <alice> ...",
			// "12:34:56 <bob> ...", "<SAL> [ts] <carol> ...").
			lineStart + `(?:<[^<>\s]{1,32}>[ \t]*(?:\[[^\]\n]{1,32}\][ \t]*)?)?<[A-Za-z_\[\]\\^{}|` + "`" + `][\w\[\]\\^{}|` + "`" + `\-.]{0,31}>[ \t]+[^\n]*$`,
			// A monitoring alert: "PROBLEM - Disk space on host1 is CRITICAL".
			lineStart + `(?:[\w\-]{1,32}:[ \t]*)?(?:PROBLEM|RECOVERY|ALERT|FIRING|RESOLVED)[ \t]*[-:][^\n]*\bis[\t\f\r ]+(?:CRITICAL|WARNING|UNKNOWN|OK)\b[^\n]*$`,
			// A log line: a timestamp, then a level ("2021-03-04 10:00:01,123 ERROR ...").
			`^[ \t]*(?:[•*+\-][ \t]*)?\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2})?(?:[.,]\d+)?(?:Z|[+\-]\d{2}:?\d{2})?\]?[ \t]+(?:\S+[ \t]+){0,2}\[?(?:ERROR|ERR|WARN|WARNING|INFO|DEBUG|TRACE|FATAL|CRIT|CRITICAL|SEVERE|NOTICE)\]?[: \t][^\n]*$`,
			// A syslog line: "Mar  7 06:44:02 host1 daemon[123]: ...".
			`^[ \t]*(?:[•*+\-][ \t]*)?(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[ \t]+\d{1,2}[ \t]+\d{2}:\d{2}:\d{2}[ \t]+\S+[ \t]+[\w\-./]+(?:\[\d+\])?:[^\n]*$`,
			// A stack trace: a Java frame, "Caused by:", a Python
			// traceback and its frames, a Go goroutine header.
			`^[ \t]*at[ \t]+[\w$.<>]+\((?:[\w$.\-]+:\d+|Native Method|Unknown Source)\)[^\n]*$`,
			`^[ \t]*(?:Caused by:|Exception in thread\b)[^\n]*$`,
			`^[ \t]*(?:Traceback \(most recent call last\):|File "[^"\n]+", line \d+)[^\n]*$`,
			`^[ \t]*goroutine \d+ \[[^\]\n]+\]:[^\n]*$`,
			// A PHP error: "PHP Fatal error: ...", "Warning: ...".
			lineStart + `(?:PHP[ \t]+)?(?:Fatal error|Catchable fatal error|Parse error|Warning|Notice|Deprecated):[^\n]*$`,
		}
		// Every alternative starts with ^: written once, outside the
		// alternation, it lets the matcher try the start of the line only.
		for i, a := range alts {
			alts[i] = strings.TrimPrefix(a, "^")
		}
		return regexp.MustCompile(`^(?:` + strings.Join(alts, "|") + `)`)
	})

	// machineOutput marks a sentence as printed by a program: a memory
	// address, a source location ("Foo.java:123", "in /srv/a.php on line
	// 97"), a frame ("Foo::bar called from").
	machineOutput = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`\b0x[0-9a-fA-F]{8,}\b|\b[\w$]+\.(?:` + strings.Join(sourceExts, "|") + `):\d+\b|\bat [\w$]+(?:\.[\w$<>]+)+\(|\bTraceback \(most recent call last\)|\bException in thread\b|\b\w+::\w+(?:\(\))? called from\b|\.[a-z]{2,5} on line \d+\b`)
	})
)

// sourceExts are the extensions (without the dot) of the source files
// whose locations ("Foo.java:123") machineOutput knows.
var sourceExts = []string{"java", "kt", "scala", "py", "go", "rb", "php", "cc", "cpp", "c", "js", "ts"}

// appendLineMatch appends to ss the byte range of re's match in line, a
// line of a text starting at offset off, if re matches (re is anchored at
// the line's start and run on one line at a time).
func appendLineMatch(ss []span, re *regexp.Regexp, off int, line string) []span {
	if m := re.FindStringIndex(line); m != nil {
		ss = append(ss, span{start: off + m[0], end: off + m[1]})
	}
	return ss
}

// eachLine calls fn with every line of text (without its newline) and the
// offset it starts at.
func eachLine(text string, fn func(off int, line string)) {
	for off := 0; off <= len(text); {
		end := strings.IndexByte(text[off:], '\n')
		if end < 0 {
			end = len(text) - off
		}
		fn(off, text[off:off+end])
		off += end + 1
	}
}

// machineSentence reports whether a sentence holds program output.
func machineSentence(s string) bool { return mayBeMachine(s) && machineOutput().MatchString(s) }

// mayBeMachine is a cheap test that machineOutput may match s: each of its
// alternatives needs one of these: "0x", "::", " on line ", "Exception in
// thread", "Traceback (", a source file's extension before a colon and a
// digit (".go:12"), "at " before a word, dotted names and a parenthesis
// ("at com.foo.Bar.baz("). Most sentences hold none and skip the regexp.
func mayBeMachine(s string) bool {
	if strings.Contains(s, "0x") || strings.Contains(s, "::") || strings.Contains(s, " on line ") ||
		strings.Contains(s, "Exception in thread") || strings.Contains(s, "Traceback (") {
		return true
	}
	for i := strings.IndexByte(s, ':'); i >= 0 && i+1 < len(s); {
		if c := s[i+1]; c >= '0' && c <= '9' && sourceExt(s[:i]) {
			return true
		}
		j := strings.IndexByte(s[i+1:], ':')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	for i := strings.Index(s, "at "); i >= 0; {
		j := i + len("at ")
		for j < len(s) && (isWordByte(s[j]) && s[j] != '-' || s[j] == '$') {
			j++
		}
		// The frame's dotted name goes on to its argument list: "at
		// com.foo.Bar.baz(", not "at that time." (most do).
		k := j
		for j > i+len("at ") && k < len(s) && s[k] == '.' {
			m := k + 1
			for m < len(s) && frameNameByte(s[m]) {
				m++
			}
			if m == k+1 {
				break
			}
			if k = m; k < len(s) && s[k] == '(' {
				return true
			}
		}
		n := strings.Index(s[i+1:], "at ")
		if n < 0 {
			break
		}
		i += 1 + n
	}
	return false
}

// frameNameByte reports whether c is in [\w$<>], what a dotted name of
// machineOutput's stack frame holds after a dot.
func frameNameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '$' || c == '<' || c == '>'
}

// sourceExt reports whether s ends with a dot and a source file's
// extension that machineOutput knows (sourceExts).
func sourceExt(s string) bool {
	for _, e := range sourceExts {
		if len(s) > len(e) && s[len(s)-len(e)-1] == '.' && strings.HasSuffix(s, e) {
			return true
		}
	}
	return false
}
