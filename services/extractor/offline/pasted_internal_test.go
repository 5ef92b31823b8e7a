package offline

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// pastedSpans are the byte ranges of the lines of text pasted from a chat
// transcript, a log, an alert or a stack trace, matched line by line as
// lineMatches.overlap matches them.
func pastedSpans(text string) []span {
	var out []span
	eachLine(text, func(off int, line string) { out = appendLineMatch(out, pastedLine(), off, line) })
	return out
}

// pastedLines returns the text of the spans pastedSpans finds.
func pastedLines(text string) []string {
	var out []string
	for _, s := range pastedSpans(text) {
		out = append(out, text[s.start:s.end])
	}
	return out
}

func TestPastedSpansFindChatTranscriptLines(t *testing.T) {
	for _, line := range []string{
		"[09:14] <zed_ops> the volume on store3 is full again",
		"• [09:14:55] <zed-ops> the volume on store3 is full again",
		"09:14:55 <ZedOps|away> the volume on store3 is full again",
		"03/04/21 09:14 <zed> the volume on store3 is full again",
		"• 2021-03-04T09:14:55 <zed> the volume on store3 is full again",
		"<LOG> [2021-03-04T09:14:55Z] <zed> restarting the queue workers",
	} {
		text := "The queue stalled after the migration.\n" + line + "\nThe migration was rolled back."
		require.Equal(t, []string{line}, pastedLines(text), line)
	}
	// Prose that quotes a nick or compares values is no transcript line.
	for _, line := range []string{
		"• 09:14 - zed notices that the queue is stuck",
		"• 09:14 zed says \"<zed> it is stuck\" in the channel",
		"The value must be <10> or more, the disk was not full.",
		"Latency went from 5ms to 50ms < 3 times a day > once a week.",
	} {
		require.Empty(t, pastedLines(line), line)
	}
}

func TestPastedSpansFindLogAlertAndTraceLines(t *testing.T) {
	for _, line := range []string{
		"[09:20:01] <watchbot> PROBLEM - Disk space on store3 is CRITICAL: DISK CRITICAL - free space: /srv 12 MB",
		"• 09:20 alertbot: PROBLEM - Disk space on store3 is CRITICAL: 1% free",
		"RECOVERY - Disk space on store3 is OK",
		"2021-03-04 09:20:01,552 ERROR [worker-7] QueueWriter - out of memory while flushing batch",
		"2021-03-04T09:20:01Z WARN disk usage above 95% on /srv",
		"Mar  4 09:20:01 store3 kernel[812]: Out of memory: Killed process 4411 (java)",
		"\tat org.example.queue.Writer.flush(Writer.java:118)",
		"    at org.example.queue.Writer.lambda$run$0(Unknown Source)",
		"Caused by: java.lang.IllegalStateException: deadlock detected in pool",
		"Exception in thread \"main\" java.lang.OutOfMemoryError: Java heap space",
		"Traceback (most recent call last):",
		"  File \"/srv/app/worker.py\", line 41, in flush",
		"goroutine 17 [semaphore acquire, 5 minutes]:",
		"• PHP Fatal error: Allowed memory size of 134217728 bytes exhausted",
		"Warning: the config value limit is not an integer in /srv/app/Pool.php",
	} {
		text := "Root cause: a configuration change lowered the pool size.\n" + line + "\nWe reverted it."
		require.Equal(t, []string{line}, pastedLines(text), line)
	}
	// A timeline line in prose, starting with a timestamp, is not a log
	// line, and neither is prose naming a level.
	for _, line := range []string{
		"• 2021-03-04 09:20 UTC: the disk of store3 filled up and writes failed",
		"• 09:20: alerting fired for the disk of store3",
		"The worker logged an ERROR when the disk filled up.",
		"We looked at the problem - the disk is ok now.",
	} {
		require.Empty(t, pastedLines(line), line)
	}
}

func TestMachineSentenceFindsProgramOutput(t *testing.T) {
	for _, s := range []string{
		"The dump said: thread 0x00007f1c2a3b4c5d waiting, Deadlock found.",
		"It failed in QueueWriter.java:118 with a deadlock.",
		"The trace went through at org.example.Pool.take( and stopped.",
		"Traceback (most recent call last): a memory leak in the worker.",
		"The request died in /srv/app/lib/Pool.php on line 212 after the memory limit was exceeded.",
		"Queue::push called from Worker::run with a wrong config value.",
	} {
		require.True(t, machineSentence(s), s)
	}
	for _, s := range []string{
		"A deadlock in the connection pool stalled the workers.",
		"Version 2.3 of worker.py was deployed at 10:00.",
		"The value 0x10 was written to the flag register.",
		"A bug in the pool's connect method left the settings wrong.",
		"Acme\\Db\\Pool::connect is the method the new release changed.",
	} {
		require.False(t, machineSentence(s), s)
	}
}
