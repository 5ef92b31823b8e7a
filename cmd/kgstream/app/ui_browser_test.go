package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/kgstream/kgstream/cmd/kgstream/app"
	"github.com/kgstream/kgstream/pkg/events"
	"github.com/kgstream/kgstream/pkg/provenance"
	"github.com/kgstream/kgstream/pkg/store"
	"github.com/kgstream/kgstream/pkg/stream"
)

const uiTokens = `[
 {"token":"ui-admin","tenant":"acme","principal":"root","admin":true,"writer":true},
 {"token":"ui-alice","tenant":"acme","principal":"alice","groups":["oncall"]},
 {"token":"ui-guest","tenant":"acme","principal":"guest"}
]`

// The restricted document: readable by the oncall group only. Its id,
// title, a phrase of its text and its own incident entity must never reach
// the guest's DOM.
const (
	secID     = "SEC-77"
	secTitle  = "SEC-77: Quartz lantern signing key exposed on token-issuer"
	secPhrase = "quartz lantern"
)

var secText = secTitle + "\nA quartz lantern debug endpoint exposed the signing key of token-issuer for 40 minutes. " +
	"Token Issuer was restarted with a new key and the Trust Team revoked every session.\n"

// hubIncidents is how many extra public incidents mention token-issuer.
const hubIncidents = 7

// secret lists what the guest must never see, in any case.
var secret = []string{"sec-77", "sec77", "quartz", "lantern"}

func uiScreenshotDir(t *testing.T) string {
	dir := os.Getenv("KG_UI_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "kgstream-ui-screenshots")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// browser starts a headless Debian Chromium with an empty profile.
func browser(t *testing.T) (context.Context, context.CancelFunc) {
	t.Helper()
	bin := "/usr/bin/chromium"
	_, err := os.Stat(bin)
	require.NoError(t, err, "TestWebUI needs Debian's chromium at %s (apt-get install -y chromium; .ci/run installs it)", bin)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin), chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("headless", true), chromedp.Flag("no-sandbox", true), chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 800),
	}
	actx, cancelA := chromedp.NewExecAllocator(t.Context(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	require.NoError(t, chromedp.Do(ctx), "starting chromium") // the first run, without a deadline, owns the browser
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException {
				fmt.Fprintf(os.Stderr, "browser console: %s: %s\n", m.Type, m.Text)
			}
		}
	}()
	return ctx, func() { cancelB(); cancelA() }
}

type void = chromedp.Void

// stepTimeout bounds one browser step, so that a missing element fails the
// test instead of hanging it.
const stepTimeout = 90 * time.Second

// do runs steps in the browser within stepTimeout.
func do(ctx context.Context, steps ...chromedp.Action[void]) error {
	c, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	return chromedp.Do(c, steps...)
}

// run reads one value in the browser within stepTimeout.
func run[T any](ctx context.Context, a chromedp.Action[T]) (T, error) {
	c, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	return chromedp.Run(c, a)
}

// js runs a statement in the page.
func js(stmt string) chromedp.Action[void] {
	return func(ctx context.Context, t *chromedp.Target) (void, error) {
		_, err := chromedp.Evaluate[bool]("(() => { "+stmt+"; return true })()")(ctx, t)
		return void{}, err
	}
}

// submit submits a form as a user does (its submit handler runs).
func submit(id string) chromedp.Action[void] {
	return js(`document.getElementById("` + id + `").requestSubmit()`)
}

// eval reads the value of a JS expression.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := run(ctx, chromedp.Evaluate[T](expr))
	require.NoError(t, err, expr)
	return v
}

// text reads an element's visible text.
func text(t *testing.T, ctx context.Context, css string) string {
	t.Helper()
	v, err := run(ctx, chromedp.Text(chromedp.CSS(css)))
	require.NoError(t, err, css)
	return v
}

// traffic sums what the browser transferred and checks every request goes
// to the server's own origin.
type traffic struct {
	mu       sync.Mutex
	bytes    float64
	decoded  int64
	requests int
	foreign  []string
}

func (tr *traffic) listen(ctx context.Context, origin string) error {
	return chromedp.Listen(ctx, func(ev any) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			tr.requests++
			if !strings.HasPrefix(e.Request.URL, origin) && !strings.HasPrefix(e.Request.URL, "data:") {
				tr.foreign = append(tr.foreign, e.Request.URL)
			}
		case *network.EventLoadingFinished:
			tr.bytes += e.EncodedDataLength
		case *network.EventDataReceived:
			tr.decoded += e.DataLength
		}
	})
}

// poll runs a JS expression until it is true.
func poll(expr string) chromedp.Action[void] {
	return func(ctx context.Context, t *chromedp.Target) (void, error) {
		_, err := chromedp.Poll[bool]("!!("+expr+")", chromedp.WithPollingTimeout(60*time.Second), chromedp.WithPollingInterval(50*time.Millisecond))(ctx, t)
		if err != nil {
			return void{}, fmt.Errorf("waiting for %s: %w", expr, err)
		}
		return void{}, nil
	}
}

func signIn(ctx context.Context, base, token string) error {
	return do(ctx,
		chromedp.Navigate(base+"/ui/#/signin"), // a fresh tab: nothing in sessionStorage
		chromedp.WaitVisible(chromedp.ID(`token`)),
		chromedp.SendKeys(chromedp.ID(`token`), token),
		submit(`signin`),
		chromedp.WaitVisible(chromedp.ID(`question`)),
	)
}

// ask asks in mode and waits for the answer or an error.
func ask(ctx context.Context, mode, question string) error {
	return do(ctx,
		js(`location.hash = "#/ask"`),
		chromedp.WaitVisible(chromedp.ID(`mode`)),
		chromedp.SetValue(chromedp.ID(`mode`), mode),
		js(`document.getElementById("mode").dispatchEvent(new Event("change"))`),
		js(`document.getElementById("question").value = `+jsString(question)),
		js(`document.getElementById("answer").textContent = ""`),
		submit(`ask`),
		poll(`!!document.querySelector("#answer #citations, #answer .status.error, #answer #answer-text")`),
	)
}

func outerHTML(ctx context.Context) (string, error) {
	return run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML + " " +
		Array.from(document.querySelectorAll("#graph")).map(g => g.cy ? g.cy.nodes().map(n => n.id() + " " + n.data("label")).join(" ") : "").join(" ")`))
}

func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	screenshotAt(t, ctx, dir, name, "")
}

// screenshotAt saves the page at both widths scrolled to the element css
// ("" for the top of the page).
func screenshotAt(t *testing.T, ctx context.Context, dir, name, css string) {
	t.Helper()
	scroll := `window.scrollTo(0, 0)`
	if css != "" {
		scroll = `document.querySelector(` + jsString(css) + `).scrollIntoView({block: "start"})`
	}
	for _, vp := range []struct {
		w, h   int64
		suffix string
	}{{1280, 800, "1280x800"}, {390, 844, "phone-390x844"}} {
		require.NoError(t, do(ctx,
			chromedp.EmulateViewport(vp.w, vp.h, chromedp.EmulateScale(1)),
			js(scroll+`; document.querySelectorAll("#graph").forEach(g => g.cy && (g.cy.resize(), g.cy.fit(undefined, 20)))`)))
		buf, err := run(ctx, chromedp.CaptureScreenshot())
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+"-"+vp.suffix+".png"), buf, 0o644))
	}
	require.NoError(t, do(ctx, chromedp.EmulateViewport(1280, 800)))
}

// accessible checks that every control has a label and every button and
// link a name, and measures the lowest text contrast on the page.
const a11yJS = `(() => {
  const problems = [];
  for (const el of document.querySelectorAll("input, select, textarea")) {
    if (el.type === "hidden" || el.closest("[hidden]")) continue;
    const named = (el.id && document.querySelector('label[for="' + el.id + '"]')) || el.getAttribute("aria-label") || el.getAttribute("aria-labelledby");
    if (!named) problems.push("unlabelled " + el.tagName + "#" + el.id);
  }
  for (const el of document.querySelectorAll("button, a[href]")) {
    if (el.closest("[hidden]")) continue;
    if (!(el.getAttribute("aria-label") || el.textContent.trim())) problems.push("unnamed " + el.tagName + " " + el.outerHTML.slice(0, 80));
  }
  const parse = (c) => { const m = c.match(/[\d.]+/g); return m ? m.map(Number) : [0, 0, 0, 0]; };
  const lum = ([r, g, b]) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); }; return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
  const bgOf = (el) => { for (let e = el; e; e = e.parentElement) { const c = parse(getComputedStyle(e).backgroundColor); if (c.length < 4 || c[3] > 0.99) if (!(c.length >= 4 && c[3] === 0)) return c; } return [255, 255, 255]; };
  let min = 99, where = "";
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!n.textContent.trim() || !el || el.closest("[hidden]") || !el.getClientRects().length) continue;
    const st = getComputedStyle(el);
    if (st.visibility === "hidden" || st.display === "none") continue;
    const fg = parse(st.color), bg = bgOf(el);
    const a = lum(fg), b = lum(bg);
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    const large = parseFloat(st.fontSize) >= 24 || (parseFloat(st.fontSize) >= 18.66 && Number(st.fontWeight) >= 700);
    if (ratio < (large ? 3 : 4.5)) problems.push("contrast " + ratio.toFixed(2) + " on " + el.tagName + ": " + n.textContent.trim().slice(0, 40));
    if (ratio < min) { min = ratio; where = el.tagName + " " + n.textContent.trim().slice(0, 30); }
  }
  return {problems, min, where};
})()`

type a11yResult struct {
	Problems []string `json:"problems"`
	Min      float64  `json:"min"`
	Where    string   `json:"where"`
}

func checkAccessible(t *testing.T, ctx context.Context, pageName string, minContrast map[string]float64) {
	t.Helper()
	r := eval[a11yResult](t, ctx, a11yJS)
	require.Empty(t, r.Problems, "accessibility problems on %s", pageName)
	minContrast[pageName] = r.Min
}

func TestWebUI(t *testing.T) {
	dir := uiScreenshotDir(t)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	require.NoError(t, os.WriteFile(tokens, []byte(uiTokens), 0o600))
	a := startApp(t, app.Config{TokensFile: tokens})
	base := a.URL()
	ctx := t.Context()
	require.NoError(t, app.IngestDemo(ctx, base, "ui-admin"))
	admin, alice := app.NewClient(base, "ui-admin"), app.NewClient(base, "ui-alice")
	_, err := admin.PostDocument(ctx, app.Document{ID: secID, Title: secTitle, Text: secText, DocType: "incident", Source: "demo",
		ACL: map[string]any{"groups": []string{"oncall"}}})
	require.NoError(t, err)
	// Seven more public incidents name token-issuer, so that its incoming
	// "mentions" edges are a hub the graph draws collapsed.
	public := []string{"PM-201", "PM-202", "PM-203", "PM-204", "PM-205"}
	for i := range hubIncidents {
		id := fmt.Sprintf("PM-31%d", i)
		_, err := admin.PostDocument(ctx, app.Document{ID: id, Title: fmt.Sprintf("%s: token-issuer slow after deploy %d", id, i),
			Text:    fmt.Sprintf("%s: token-issuer slow after deploy %d\ntoken-issuer answered slowly for %d minutes after a deploy.\n", id, i, 5+i),
			DocType: "incident", Source: "demo", ACL: map[string]any{"public": true}})
		require.NoError(t, err)
		public = append(public, id)
	}
	waitIndexed(t, admin, public)
	waitIndexed(t, alice, []string{secID}) // admins write every document but read only what its ACL admits
	// Reports exist for the communities (the global answer and the
	// communities page read them).
	require.NoError(t, admin.WaitFor(ctx, 60*time.Second, func() (bool, error) {
		var r struct {
			Communities []struct {
				ReportID string `json:"report_id"`
			} `json:"communities"`
		}
		err := admin.Do(ctx, http.MethodGet, "/v1/communities", "", nil, &r)
		ok := len(r.Communities) > 0
		for _, c := range r.Communities {
			ok = ok && c.ReportID != ""
		}
		return ok, err
	}))
	// ... and nothing is left to change them: a re-clustering still due
	// would rewrite them under the subtests (a drift answer with no
	// admitted report has no follow-ups).
	waitReportsSettled(t, a, admin)
	// Alice reads SEC-77 through her group before the revocation.
	require.NoError(t, alice.Do(ctx, http.MethodGet, "/v1/source?id="+secID, "", nil, nil))

	figures := map[string]any{}
	minContrast := map[string]float64{}

	// --- Page weight and time to first answer in a fresh browser.
	bctx, cancel := browser(t)
	defer cancel()
	var tr traffic
	require.NoError(t, tr.listen(bctx, base))
	_, err = chromedp.Call(bctx, network.Enable, network.EnableParams{})
	require.NoError(t, err)
	began := time.Now()
	if err := signIn(bctx, base, "ui-alice"); err != nil {
		html, _ := outerHTML(bctx)
		t.Fatalf("signing in: %v; page: %s", err, html)
	}
	require.NoError(t, ask(bctx, "local", "What broke logins on token-issuer?"))
	loadToAnswer := time.Since(began)
	firstAnswer := eval[float64](t, bctx, `performance.getEntriesByName("ask").slice(-1)[0].duration`)
	require.NoError(t, do(bctx, poll(`document.querySelectorAll("#citations li").length > 0`)))
	tr.mu.Lock()
	figures["requests"], figures["bytes_transferred"], figures["bytes_decoded"] = tr.requests, int64(tr.bytes), tr.decoded
	figures["first_answer_ms"], figures["load_signin_first_answer_ms"] = firstAnswer, float64(loadToAnswer.Microseconds())/1000
	require.Empty(t, tr.foreign, "the UI loads nothing from another origin")
	tr.mu.Unlock()
	t.Logf("page weight: %d requests, %d bytes transferred (%d decoded); first answer %.1f ms; load + sign-in + first answer %.0f ms",
		figures["requests"], figures["bytes_transferred"], figures["bytes_decoded"], firstAnswer, figures["load_signin_first_answer_ms"])
	stored := eval[string](t, bctx, `sessionStorage.getItem("kgstream.token") + "|" + (localStorage.length)`)
	require.Equal(t, "ui-alice|0", stored, "the token is kept in sessionStorage only")

	// --- Alice asks in every mode and sees citations.
	t.Run("modes", func(t *testing.T) {
		for _, m := range []struct{ mode, q string }{
			{"auto", "What broke logins on token-issuer?"},
			{"local", "What happened to basket-api?"},
			{"global", "What are the recurring themes across all incidents?"},
			{"basic", "signing certificate expired"},
			{"drift", "Why did logins fail?"},
			{"aggregate", ""},
			{"paths", ""},
		} {
			require.NoError(t, ask(bctx, m.mode, m.q), m.mode)
			n := eval[int](t, bctx, `document.querySelectorAll("#citations li").length`)
			txt := text(t, bctx, `#answer`)
			require.Positive(t, n, "mode %s shows citations; answer: %s", m.mode, txt)
			var resp uiQueryResponse
			if m.mode == "auto" || m.mode == "global" || m.mode == "drift" {
				require.Equal(t, http.StatusOK, apiPost(t, base, "ui-alice", fmt.Sprintf(`{"mode":%q,"question":%q}`, m.mode, m.q), &resp), m.mode)
			}
			// The UI's request and the API's are two answers: when a change
			// landed between them (a DRIFT answer draws on reports, entities
			// and text units), both are asked again, at most twice.
			for try := 0; m.mode == "drift" && try < 2 && !driftShown(t, bctx, resp); try++ {
				t.Logf("drift: the UI's answer and the API's differ; asking both again")
				require.NoError(t, ask(bctx, m.mode, m.q), m.mode)
				resp = uiQueryResponse{}
				require.Equal(t, http.StatusOK, apiPost(t, base, "ui-alice", fmt.Sprintf(`{"mode":%q,"question":%q}`, m.mode, m.q), &resp), m.mode)
			}
			switch m.mode {
			case "auto":
				// The route and its reason, as the API gives them.
				routed := text(t, bctx, `#routed`)
				require.Regexp(t, `Auto chose (local|global|basic|drift|aggregate) search`, routed)
				require.NotEmpty(t, resp.Route)
				require.Contains(t, routed, "Auto chose "+resp.RoutedTo+" search")
				require.Equal(t, resp.Route, text(t, bctx, `#route-reason`))
				screenshot(t, bctx, dir, "ask-auto")
				checkAccessible(t, bctx, "ask-auto", minContrast)
			case "global":
				// Every theme: its exact count and each member as a link.
				require.NotNil(t, resp.Global)
				require.NotEmpty(t, resp.Global.Themes, "the global answer has themes")
				rows := eval[[]uiThemeRow](t, bctx, `Array.from(document.querySelectorAll("#themes tbody tr")).map(tr => ({
					id: tr.dataset.theme, count: Number(tr.querySelector("td.count").textContent),
					members: Array.from(tr.querySelectorAll("td.members a.member")).map(a => a.textContent),
					hrefs: Array.from(tr.querySelectorAll("td.members a.member")).map(a => a.getAttribute("href"))}))`)
				require.Len(t, rows, len(resp.Global.Themes))
				for i, th := range resp.Global.Themes {
					require.Equal(t, th.Target.ID, rows[i].ID)
					require.Equal(t, th.Count, rows[i].Count, th.Target.ID)
					require.Equal(t, th.Members, rows[i].Members, th.Target.ID)
					for _, href := range rows[i].Hrefs {
						require.True(t, strings.HasPrefix(href, "#/entity/"+th.SubjectType+"%3A"), href)
					}
				}
				require.NotNil(t, resp.Global.Coverage, "the global answer has a coverage line")
				cov := text(t, bctx, `#coverage`)
				require.Contains(t, cov, fmt.Sprintf("%d of %d %s", resp.Global.Coverage.Covered, resp.Global.Coverage.Subjects, resp.Global.Coverage.SubjectType))
				t.Logf("global: %d themes, top %s = %d; %s", len(rows), rows[0].ID, rows[0].Count, cov)
				screenshot(t, bctx, dir, "ask-global")
				screenshotAt(t, bctx, dir, "ask-global-themes", "#themes")
				checkAccessible(t, bctx, "ask-global", minContrast)
				// A member link opens that incident's entity page.
				require.NoError(t, do(bctx, js(`document.querySelector("#themes td.members a.member").click()`),
					poll(`location.hash.startsWith("#/entity/") && !!document.querySelector("#entity-name")`)))
				require.Equal(t, rows[0].Members[0], text(t, bctx, `#entity-name`))
			case "drift":
				// The primer and every branch: question, answer, citations.
				require.NotNil(t, resp.Drift, "the drift answer carries its tree")
				require.NotEmpty(t, resp.Drift.FollowUps)
				branches := driftBranches(t, bctx)
				require.Len(t, branches, len(resp.Drift.FollowUps))
				cited := 0
				for i, b := range resp.Drift.FollowUps {
					require.Equal(t, b.Question, branches[i].Question)
					require.True(t, branches[i].Answer, b.Question)
					for _, c := range b.Citations {
						require.Contains(t, branches[i].Cites, c.DocID, b.Question)
						cited++
					}
				}
				require.Positive(t, cited, "the follow-ups cite their documents")
				if len(resp.Drift.Primer.Citations) > 0 {
					require.Positive(t, eval[int](t, bctx, `document.querySelectorAll("#drift-primer button.cite").length`))
				}
				t.Logf("drift: %d follow-ups (%s), %d branch citations", len(branches), resp.Drift.FollowUpsBy, cited)
				screenshot(t, bctx, dir, "ask-drift")
				screenshotAt(t, bctx, dir, "ask-drift-tree", "#drift")
				checkAccessible(t, bctx, "ask-drift", minContrast)
			}
		}
	})

	// --- A citation opens the cited text unit with its sentence highlighted.
	t.Run("evidence", func(t *testing.T) {
		require.NoError(t, ask(bctx, "local", "What broke logins on token-issuer?"))
		require.NoError(t, do(bctx,
			chromedp.Click(chromedp.CSS(`#answer-text button.cite[data-doc^="PM-"]`)),
			chromedp.WaitVisible(chromedp.ID(`evidence-sentence`))))
		sentence, unit, title := text(t, bctx, `#evidence-sentence`), text(t, bctx, `#evidence-text`), text(t, bctx, `#evidence-title`)
		require.NotEmpty(t, strings.TrimSpace(sentence))
		require.Contains(t, unit, sentence)
		require.NotEmpty(t, title)
		focused := eval[string](t, bctx, `document.activeElement.id`)
		require.Equal(t, "evidence-title", focused, "focus moves to the evidence")
		t.Logf("evidence: %q, highlighted %q", title, sentence)
		screenshot(t, bctx, dir, "ask-evidence")
		checkAccessible(t, bctx, "ask-evidence", minContrast)
		// Back returns focus to the citation.
		require.NoError(t, do(bctx, chromedp.Click(chromedp.CSS(`#evidence button.secondary`)),
			poll(`document.activeElement && document.activeElement.classList.contains("cite")`)))
	})

	// --- Keyboard only: ask, reach a citation, open its evidence, come back,
	// and reach an entity; every focus stop shows a visible focus ring.
	t.Run("keyboard", func(t *testing.T) {
		require.NoError(t, do(bctx, js(`location.hash = "#/entity"`), js(`location.hash = "#/ask"`), chromedp.WaitVisible(chromedp.ID(`question`)),
			chromedp.Focus(chromedp.ID(`mode`)), chromedp.KeyEvent(kb.ArrowDown), // auto -> local
			chromedp.KeyEvent(kb.Tab)))
		require.Equal(t, "local", eval[string](t, bctx, `document.getElementById("mode").value`))
		require.Equal(t, "question", eval[string](t, bctx, `document.activeElement.id`))
		require.NoError(t, do(bctx, chromedp.KeyEvent("What broke logins on token-issuer?"), chromedp.KeyEvent(kb.Enter),
			poll(`document.querySelectorAll("#answer-text button.cite").length > 0`)))
		// tabTo presses Tab until the focused element matches css, checking
		// that each stop's focus is visible.
		tabTo := func(css string) {
			t.Helper()
			for range 80 {
				require.NoError(t, do(bctx, chromedp.KeyEvent(kb.Tab)))
				ring := eval[string](t, bctx, `(() => { const e = document.activeElement; if (!e || e === document.body) return "body";
					const st = getComputedStyle(e); return e.matches(":focus-visible") && st.outlineStyle !== "none" && parseFloat(st.outlineWidth) >= 2 ? "ok" : "no ring on " + e.outerHTML.slice(0, 80); })()`)
				require.Contains(t, []string{"ok", "body"}, ring)
				if eval[bool](t, bctx, `!!document.activeElement && document.activeElement.matches(`+jsString(css)+`)`) {
					return
				}
			}
			t.Fatalf("Tab never reached %s", css)
		}
		tabTo(`#answer-text button.cite[data-doc^="PM-"]`)
		cite := eval[string](t, bctx, `document.activeElement.dataset.cite`)
		require.NoError(t, do(bctx, chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(chromedp.ID(`evidence-sentence`))))
		require.Equal(t, "evidence-title", eval[string](t, bctx, `document.activeElement.id`))
		screenshot(t, bctx, dir, "keyboard-evidence")
		tabTo(`#evidence button.secondary`)
		require.NoError(t, do(bctx, chromedp.KeyEvent(kb.Enter), poll(`document.activeElement && document.activeElement.dataset.cite === `+jsString(cite))))
		tabTo(`a.entity-link`)
		require.NoError(t, do(bctx, chromedp.KeyEvent(kb.Enter), poll(`location.hash.startsWith("#/entity/") && !!document.querySelector("#relationships")`)))
		tabTo(`#relationships button[aria-label^="Expand"]`)
		require.NoError(t, do(bctx, chromedp.KeyEvent(kb.Enter), poll(`(document.getElementById("graph").dataset.expanded || "").length > 0`)))
	})

	// --- An entity page with its graph; alice sees SEC-77 around token-issuer.
	t.Run("entity", func(t *testing.T) {
		require.NoError(t, do(bctx,
			js(`location.hash = "#/entity/service:tokenissuer"`),
			poll(`!!document.querySelector("#graph canvas") && Number(document.getElementById("graph").dataset.nodes) >= 2`)))
		ids := eval[[]string](t, bctx, `document.getElementById("graph").cy.nodes().map(n => n.id())`)
		require.Contains(t, ids, "service:tokenissuer")
		html, err := outerHTML(bctx)
		require.NoError(t, err)
		require.Contains(t, strings.ToLower(html), "sec-77", "alice reads SEC-77 before the revocation")
		edges := eval[int](t, bctx, `document.getElementById("graph").cy.edges().length`)
		require.Positive(t, edges)
		// Incidents by failure mode: the UI's groups (from /v1/paths) are
		// what the entity's and each incident's own edges say.
		want := incidentsByMode(t, alice, "service/tokenissuer")
		require.NoError(t, do(bctx, poll(`!!document.querySelector("#incidents-by-mode tbody tr")`)))
		got := eval[map[string][]string](t, bctx, `Object.fromEntries(Array.from(document.querySelectorAll("#incidents-by-mode tbody tr")).map(tr =>
			[tr.dataset.mode, Array.from(tr.querySelectorAll("td.members a.member")).map(a => a.dataset.id).sort()]))`)
		counts := eval[map[string]int](t, bctx, `Object.fromEntries(Array.from(document.querySelectorAll("#incidents-by-mode tbody tr")).map(tr =>
			[tr.dataset.mode, Number(tr.querySelector("td.count").textContent)]))`)
		require.Equal(t, want, got)
		for mode, ids := range want {
			require.Equal(t, len(ids), counts[mode], mode)
		}
		require.Contains(t, strings.Join(flatten(got), " "), "incident:sec77", "alice's groups include SEC-77")
		require.Greater(t, len(want), 1, "token-issuer's incidents have more than one failure mode (or none): %v", want)
		t.Logf("incidents by failure mode around token-issuer: %v", counts)
		// Expanding a neighbour from the table grows the graph.
		before := eval[int](t, bctx, `document.getElementById("graph").cy.nodes().length`)
		require.NoError(t, do(bctx, chromedp.Click(chromedp.CSS(`#relationships tbody button[aria-label^="Expand"]`)),
			poll(`(document.getElementById("graph").dataset.expanded || "").length > 0`)))
		after := eval[int](t, bctx, `document.getElementById("graph").cy.nodes().length`)
		require.GreaterOrEqual(t, after, before)
		t.Logf("entity graph: %d nodes, %d edges, %d after one expansion", before, edges, after)
		screenshot(t, bctx, dir, "entity")
		screenshotAt(t, bctx, dir, "entity-failure-modes", "#failure-modes")
		checkAccessible(t, bctx, "entity", minContrast)

		// The hub of incoming "mentions" is drawn collapsed; a mouse click
		// on it (where cytoscape draws it) expands it.
		require.NoError(t, do(bctx, js(`location.hash = "#/entity"`), js(`location.hash = "#/entity/service:tokenissuer"`),
			poll(`!!document.querySelector("#graph canvas") && Number(document.getElementById("graph").dataset.hubs) >= 1`)))
		hubLabel := eval[string](t, bctx, `document.getElementById("graph").cy.nodes(".hub")[0].data("label")`)
		require.Regexp(t, `^\w+ \(\+\d+\)$`, hubLabel)
		nodesBefore := eval[int](t, bctx, `Number(document.getElementById("graph").dataset.nodes)`)
		hubsBefore := eval[int](t, bctx, `Number(document.getElementById("graph").dataset.hubs)`)
		screenshot(t, bctx, dir, "entity-hub")
		xy := eval[[]float64](t, bctx, `(() => { const g = document.getElementById("graph"); g.scrollIntoView({block: "center"}); g.cy.resize(); const n = g.cy.nodes(".hub")[0];
			const p = n.renderedPosition(); const r = g.getBoundingClientRect(); return [r.left + p.x, r.top + p.y]; })()`)
		require.NoError(t, do(bctx, chromedp.MouseClickXY(xy[0], xy[1]),
			poll(fmt.Sprintf(`Number(document.getElementById("graph").dataset.hubs) === %d`, hubsBefore-1))))
		nodesAfter := eval[int](t, bctx, `Number(document.getElementById("graph").dataset.nodes)`)
		require.GreaterOrEqual(t, nodesAfter, nodesBefore+hubIncidents, "the hub's members are drawn")
		t.Logf("hub %q (of %d hubs): %d nodes collapsed, %d expanded", hubLabel, hubsBefore, nodesBefore, nodesAfter)
		screenshot(t, bctx, dir, "entity-hub-expanded")
	})

	t.Run("communities", func(t *testing.T) {
		// The demo's graph clusters into one level here, or two with few
		// level-1 communities. For the tree, the test stores what a deeper
		// hierarchical run leaves: the largest community split into two
		// more level-1 children. The original
		// partition is stored back afterwards.
		orig, err := a.Stores.Communities(ctx, "acme")
		require.NoError(t, err)
		last, err := a.Stores.LastRun(ctx, "acme")
		require.NoError(t, err)
		// Each stored run is announced, as the clusterer does, so the query
		// service's caches drop the partition they hold.
		announce := func(run int64) {
			_, err := a.Bus.Publish(ctx, events.KindCommunitiesChanged, "acme", fmt.Sprintf("acme/ui-test/communities/%d", run),
				&events.CommunitiesChanged{Header: events.Header{Schema: events.SchemaVersion, Tenant: "acme"}, Run: run,
					Changed: []events.CommunityChange{}, Removed: []string{}})
			require.NoError(t, err)
		}
		require.NoError(t, a.Stores.ReplaceCommunities(ctx, "acme", last+1, splitLargest(t, orig)))
		announce(last + 1)
		defer func() {
			require.NoError(t, a.Stores.ReplaceCommunities(ctx, "acme", last+2, orig))
			announce(last + 2)
		}()
		// The tree: each community under its parent, with its level, size,
		// report title and rating, as the API gives them. The announcement
		// also has the reporter write the new communities' reports: the
		// page is opened once the API shows the planted partition with
		// every report written.
		var cs struct {
			Communities []struct {
				ID       string `json:"id"`
				Level    int    `json:"level"`
				Parent   string `json:"parent"`
				Size     int    `json:"size"`
				ReportID string `json:"report_id"`
			} `json:"communities"`
		}
		require.NoError(t, alice.WaitFor(ctx, 60*time.Second, func() (bool, error) {
			cs.Communities = nil
			if err := alice.Do(ctx, http.MethodGet, "/v1/communities", "", nil, &cs); err != nil {
				return false, err
			}
			// The planted children, not any level-1 community: the demo's
			// own partition may have some, and the page must be opened on
			// the planted one.
			planted := 0
			for _, c := range cs.Communities {
				if c.ReportID == "" {
					return false, nil
				}
				if strings.HasPrefix(c.ID, "c1-ui-") && c.Parent != "" {
					planted++
				}
			}
			return planted == 2, nil
		}))
		require.NoError(t, do(bctx,
			js(`location.hash = "#/communities"`),
			poll(`document.querySelectorAll("#findings li").length > 0 && document.querySelectorAll("#findings button.cite").length > 0`)))
		require.NoError(t, do(bctx, poll(`document.getElementById("community-list").dataset.titled === "true"`)))
		type node struct {
			Parent string `json:"parent"`
			Level  int    `json:"level"`
			Size   int    `json:"size"`
			Title  string `json:"title"`
			Rating string `json:"rating"`
		}
		nodes := eval[map[string]node](t, bctx, `Object.fromEntries(Array.from(document.querySelectorAll("#community-tree li")).map(li => [li.dataset.id, {
			parent: (li.parentElement.closest("li") || {dataset: {}}).dataset.id || "", level: Number(li.dataset.level), size: Number(li.dataset.size),
			title: li.querySelector(":scope > button").textContent, rating: li.querySelector(":scope > .rating").textContent}]))`)
		require.Len(t, nodes, len(cs.Communities))
		nested := 0
		for _, c := range cs.Communities {
			n, ok := nodes[c.ID]
			require.True(t, ok, c.ID)
			require.Equal(t, c.Parent, n.Parent, "community %s sits under its parent", c.ID)
			require.Equal(t, []int{c.Level, c.Size}, []int{n.Level, n.Size}, c.ID)
			if c.Parent != "" {
				nested++
			}
			if c.ReportID != "" {
				var rep struct {
					Title  string  `json:"title"`
					Rating float64 `json:"rating"`
				}
				require.NoError(t, alice.Do(ctx, http.MethodGet, "/v1/reports/"+url.PathEscape(c.ReportID), "", nil, &rep))
				require.Equal(t, rep.Title, n.Title, c.ID)
				require.Equal(t, fmt.Sprintf(" · rating %.1f", rep.Rating), n.Rating, c.ID)
			}
		}
		require.Positive(t, nested, "communities sit under their parents")
		t.Logf("communities: %d in the tree, %d under a parent; levels %s", len(nodes), nested, text(t, bctx, `#community-levels`))
		screenshot(t, bctx, dir, "communities")
		checkAccessible(t, bctx, "communities", minContrast)
	})

	// --- The guest never sees SEC-77 anywhere.
	t.Run("guest", func(t *testing.T) {
		gctx, cancel := browser(t)
		defer cancel()
		require.NoError(t, signIn(gctx, base, "ui-guest"))
		// The guest's own question names the secret; answers that echo it
		// (a DRIFT follow-up is the question narrowed to one entity) show
		// the guest's words, not the document, so the echo is cut first.
		const question = "What happened with the quartz lantern signing key of token-issuer in SEC-77?"
		echo := strings.ToLower(strings.TrimSuffix(question, "?"))
		check := func(where string) {
			t.Helper()
			html, err := outerHTML(gctx)
			require.NoError(t, err)
			low := strings.ReplaceAll(strings.ToLower(html), echo, "")
			for _, s := range secret {
				require.NotContains(t, low, s, "guest's %s page shows %q", where, s)
			}
		}
		for _, m := range []string{"auto", "local", "global", "basic", "drift", "aggregate", "paths"} {
			require.NoError(t, ask(gctx, m, question))
			check("ask " + m)
		}
		for _, hash := range []string{"#/entity/service:tokenissuer", "#/entity/incident:sec77", "#/communities", "#/documents", "#/documents/SEC-77", "#/ops"} {
			require.NoError(t, do(gctx, js(`location.hash = `+jsString(hash)),
				poll(`!!document.querySelector("main h1") && !document.querySelector("main .status:not(.error)")`),
				poll(`!document.querySelector("#graph") || Number(document.getElementById("graph").dataset.nodes) >= 1`)))
			check(hash)
		}
		require.NoError(t, do(gctx, js(`location.hash = "#/entity"`),
			chromedp.WaitVisible(chromedp.ID(`entity-q`)),
			chromedp.SendKeys(chromedp.ID(`entity-q`), "sec"), submit(`entity-search`),
			poll(`document.querySelector("#entity-results").textContent.length > 0`)))
		check("entity search")
		require.NoError(t, do(gctx, js(`location.hash = "#/documents"`), chromedp.WaitVisible(chromedp.ID(`doc-count`))))
		count := text(t, gctx, `#doc-count`)
		require.Equal(t, fmt.Sprintf("%d documents", 6+hubIncidents), count, "the guest's list counts only what it may read")
		// A page of ten, then the rest on demand.
		require.NoError(t, do(gctx, poll(`document.querySelectorAll("#doc-list li").length === 10 && !!document.getElementById("doc-more")`),
			chromedp.Click(chromedp.ID(`doc-more`)),
			poll(fmt.Sprintf(`document.querySelectorAll("#doc-list li").length === %d && !document.getElementById("doc-more")`, 6+hubIncidents))))
	})

	// --- The writer adds, edits and deletes a document; documents page screenshot.
	t.Run("documents", func(t *testing.T) {
		wctx, cancel := browser(t)
		defer cancel()
		require.NoError(t, signIn(wctx, base, "ui-admin"))
		file := filepath.Join(t.TempDir(), "PM-299.txt")
		require.NoError(t, os.WriteFile(file, []byte("PM-299: Pricing engine cache stampede\nThe pricing-engine cache expired for every key at once and Basket API timed out.\n"), 0o644))
		require.NoError(t, do(wctx,
			js(`location.hash = "#/documents"`),
			chromedp.WaitVisible(chromedp.ID(`ed-file`)),
			chromedp.SetUploadFiles(chromedp.ID(`ed-file`), []string{file}),
			poll(`document.getElementById("ed-id").value === "PM-299" && document.getElementById("ed-text").value.length > 0`),
			submit(`doc-add`),
			poll(`document.getElementById("ed-status").textContent.includes("Accepted PM-299 as version 1")`)))
		waitIndexed(t, admin, []string{"PM-299"})
		require.NoError(t, do(wctx, chromedp.Click(chromedp.ID(`ed-open`)),
			poll(`(document.getElementById("doc-indexed")||{}).textContent === "indexed 1" && document.querySelectorAll("#doc-entities li").length > 0`)))
		screenshot(t, wctx, dir, "documents")
		checkAccessible(t, wctx, "documents", minContrast)
		// Edit: a new version through the gateway.
		require.NoError(t, do(wctx,
			chromedp.SetValue(chromedp.ID(`ed-text`), "PM-299: Pricing engine cache stampede\nThe pricing-engine cache expired at once; image-resizer was slow too.\n"),
			submit(`doc-edit`),
			poll(`document.getElementById("ed-status").textContent.includes("as version 2")`)))
		require.NoError(t, admin.WaitFor(ctx, 60*time.Second, func() (bool, error) {
			var d struct {
				Indexed *struct{ Version int } `json:"indexed"`
			}
			err := admin.Do(ctx, http.MethodGet, "/v1/source?id=PM-299", "", nil, &d)
			return d.Indexed != nil && d.Indexed.Version == 2, err
		}))
		// Delete: the first button asks, the second confirms.
		require.NoError(t, do(wctx, js(`location.hash = "#/documents/PM-299"`),
			chromedp.WaitVisible(chromedp.ID(`doc-delete`)), chromedp.Click(chromedp.ID(`doc-delete`)),
			chromedp.WaitVisible(chromedp.ID(`doc-delete-confirm`)), chromedp.Click(chromedp.ID(`doc-delete-confirm`)),
			poll(`location.hash === "#/documents"`)))
		require.NoError(t, admin.WaitFor(ctx, 30*time.Second, func() (bool, error) {
			err := admin.Do(ctx, http.MethodGet, "/v1/source?id=PM-299", "", nil, nil)
			return err != nil && strings.Contains(err.Error(), "404"), nil
		}))

		// Ops: the admin sees the pipeline, and replays a dead letter; the
		// dead-letter routes are refused to anyone else.
		seq := plantDeadLetter(t, a, "PM-298")
		for _, req := range []struct{ method, path string }{{http.MethodGet, "/v1/status/deadletters"},
			{http.MethodPost, fmt.Sprintf("/v1/status/deadletters/%d/replay", seq)}} {
			err := alice.Do(ctx, req.method, req.path, "", nil, nil)
			var apiErr *app.APIError
			require.ErrorAs(t, err, &apiErr)
			require.Equal(t, http.StatusForbidden, apiErr.Status, req.path)
		}
		err := admin.Do(ctx, http.MethodGet, "/v1/status/nothing", "", nil, nil)
		var notFound *app.APIError
		require.ErrorAs(t, err, &notFound)
		require.Equal(t, []any{http.StatusNotFound, "not_found"}, []any{notFound.Status, notFound.Code})
		plantStatusFigures(t, a)
		require.NoError(t, do(wctx, js(`location.hash = "#/ops"`),
			poll(`!!document.querySelector("#dead-letter-table") && document.querySelector("#dead-letter-table").textContent.includes("planted for the web UI test")`)))
		opsText := text(t, wctx, `main`)
		for _, want := range []string{"Index lag p50", "Index lag samples", "Pending: extractor", "Orphan edges", "Stale reports", "Build",
			"LLM usage", "Reported by"} {
			require.Contains(t, opsText, want)
		}
		require.NotContains(t, opsText, "in this process", "lag and LLM usage come from every live process")
		checkOpsFigures(t, wctx, admin)
		screenshot(t, wctx, dir, "ops")
		screenshotAt(t, wctx, dir, "ops-lag", "#ops-lag")
		screenshotAt(t, wctx, dir, "ops-sources", "#ops-sources")
		checkAccessible(t, wctx, "ops", minContrast)
		require.NoError(t, do(wctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`button[aria-label="Replay dead letter %d"]`, seq))),
			poll(`!document.querySelector("#dead-letter-table") || !document.querySelector("#dead-letter-table").textContent.includes("planted for the web UI test")`)))
		waitIndexed(t, admin, []string{"PM-298"})
	})

	// --- Revoking SEC-77 through the API removes it from alice's next answer and graph.
	t.Run("revoke", func(t *testing.T) {
		require.NoError(t, do(bctx, js(`location.hash = "#/ask"`)))
		require.NoError(t, ask(bctx, "local", "What happened to the signing key of token-issuer?"))
		html, err := outerHTML(bctx)
		require.NoError(t, err)
		require.Contains(t, html, secID, "alice's answer cites SEC-77 before the revocation")
		body := []byte(`{"groups":["security"]}`)
		require.NoError(t, admin.Do(ctx, http.MethodPut, "/v1/documents/"+url.PathEscape(secID)+"/acl", "application/json", body, nil))
		require.NoError(t, ask(bctx, "local", "What happened to the signing key of token-issuer?"))
		html, err = outerHTML(bctx)
		require.NoError(t, err)
		require.NotContains(t, strings.ToLower(html), "sec-77", "alice's next answer")
		require.NotContains(t, strings.ToLower(html), secPhrase)
		require.NoError(t, do(bctx,
			js(`location.hash = "#/entity/service:tokenissuer"`),
			poll(`!!document.querySelector("#graph canvas") && Number(document.getElementById("graph").dataset.nodes) >= 2`)))
		html, err = outerHTML(bctx)
		require.NoError(t, err)
		require.NotContains(t, strings.ToLower(html), "sec-77", "alice's graph after the revocation")
	})

	figures["min_contrast"] = minContrast
	data, _ := json.MarshalIndent(figures, "", "  ")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "figures.json"), data, 0o644))
	t.Logf("figures: %s; screenshots in %s", data, dir)
}

// uiQueryResponse is the part of a /v1/query answer the UI test checks.
type uiQueryResponse struct {
	RoutedTo string `json:"routed_to"`
	Route    string `json:"route"`
	Global   *struct {
		Themes []struct {
			Target      struct{ ID string } `json:"target"`
			SubjectType string              `json:"subject_type"`
			Count       int                 `json:"count"`
			Members     []string            `json:"members"`
		} `json:"themes"`
		Coverage *struct {
			SubjectType string `json:"subject_type"`
			Subjects    int    `json:"subjects"`
			Covered     int    `json:"covered"`
		} `json:"coverage"`
	} `json:"global"`
	Drift *struct {
		Primer struct {
			Citations []provenance.SourceRef `json:"citations"`
		} `json:"primer"`
		FollowUps []struct {
			Question  string                 `json:"question"`
			Citations []provenance.SourceRef `json:"citations"`
		} `json:"follow_ups"`
		FollowUpsBy string `json:"follow_ups_by"`
	} `json:"drift"`
}

type uiThemeRow struct {
	ID      string   `json:"id"`
	Count   int      `json:"count"`
	Members []string `json:"members"`
	Hrefs   []string `json:"hrefs"`
}

// driftBranches reads the DRIFT tree the page shows: each branch's
// question, whether it has an answer, and the documents it cites.
func driftBranches(t *testing.T, bctx context.Context) []uiBranch {
	t.Helper()
	return eval[[]uiBranch](t, bctx, `Array.from(document.querySelectorAll("#drift-tree > li.branch")).map(li => ({
		question: li.querySelector(".branch-question").textContent,
		answer: li.querySelector(".branch-answer").textContent.length > 0,
		cites: Array.from(li.querySelectorAll("button.cite")).map(b => b.dataset.doc)}))`)
}

// driftShown tells whether the DRIFT tree the page shows has resp's
// follow-ups, in order, each citing at least resp's documents.
func driftShown(t *testing.T, bctx context.Context, resp uiQueryResponse) bool {
	t.Helper()
	if resp.Drift == nil {
		return false
	}
	branches := driftBranches(t, bctx)
	if len(branches) != len(resp.Drift.FollowUps) {
		return false
	}
	for i, b := range resp.Drift.FollowUps {
		if b.Question != branches[i].Question {
			return false
		}
		for _, c := range b.Citations {
			if !slices.Contains(branches[i].Cites, c.DocID) {
				return false
			}
		}
	}
	return true
}

type uiBranch struct {
	Question string   `json:"question"`
	Answer   bool     `json:"answer"`
	Cites    []string `json:"cites"`
}

// splitLargest returns cs (copied) with the largest community given two
// level-1 children holding half of its members each.
func splitLargest(t *testing.T, cs []store.Community) []store.Community {
	t.Helper()
	out := make([]store.Community, len(cs))
	copy(out, cs)
	big := -1
	for i, c := range out {
		if c.Level == 0 && len(c.Members) >= 2 && (big < 0 || len(c.Members) > len(out[big].Members)) {
			big = i
		}
	}
	require.GreaterOrEqual(t, big, 0, "a community with two members to split")
	p := out[big]
	half := len(p.Members) / 2
	var kids []store.Community
	for i, members := range [][]string{p.Members[:half], p.Members[half:]} {
		kids = append(kids, store.Community{ID: fmt.Sprintf("c1-ui-%d", i), Level: 1, Parent: p.ID, Members: slices.Clone(members),
			MemberHash: fmt.Sprintf("ui-%d", i), Sources: slices.Clone(p.Sources), Run: p.Run})
	}
	p.Children = []string{kids[0].ID, kids[1].ID}
	out[big] = p
	return append(out, kids...)
}

// incidentsByMode groups the incidents next to an entity by their failure
// modes, from the entity's edges and each incident's own "failure" edges
// ("" for incidents without one); member ids are sorted.
func incidentsByMode(t *testing.T, c *app.Client, entity string) map[string][]string {
	t.Helper()
	type detail struct {
		Out, In []struct {
			Relation string
			Neighbor struct{ ID, Type string }
		}
	}
	var d detail
	require.NoError(t, c.Do(t.Context(), http.MethodGet, "/v1/entities/"+entity, "", nil, &d))
	incidents := map[string]bool{}
	for _, e := range append(d.Out, d.In...) {
		if e.Neighbor.Type == "incident" {
			incidents[e.Neighbor.ID] = true
		}
	}
	out := map[string][]string{}
	for id := range incidents {
		typ, name, _ := strings.Cut(id, ":")
		var inc detail
		require.NoError(t, c.Do(t.Context(), http.MethodGet, "/v1/entities/"+typ+"/"+url.PathEscape(name), "", nil, &inc))
		modes := map[string]bool{}
		for _, e := range inc.Out {
			if e.Relation == "failure" && e.Neighbor.Type == "failure_mode" {
				modes[e.Neighbor.ID] = true
			}
		}
		if len(modes) == 0 {
			modes[""] = true
		}
		for m := range modes {
			out[m] = append(out[m], id)
		}
	}
	for m := range out {
		slices.Sort(out[m])
	}
	return out
}

func flatten(m map[string][]string) []string {
	var all []string
	for _, v := range m {
		all = append(all, v...)
	}
	return all
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// apiPost posts a query and returns the status code.
func apiPost(t *testing.T, base, token, body string, out any) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/v1/query", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	_ = json.NewDecoder(resp.Body).Decode(out)
	return resp.StatusCode
}

// waitIndexed waits until every doc's applied version is its latest.
func waitIndexed(t *testing.T, c *app.Client, ids []string) {
	t.Helper()
	for _, id := range ids {
		require.NoError(t, c.WaitFor(t.Context(), 90*time.Second, func() (bool, error) {
			var d struct {
				Version int64                    `json:"version"`
				Indexed *struct{ Version int64 } `json:"indexed"`
			}
			err := c.Do(t.Context(), http.MethodGet, "/v1/source?id="+url.QueryEscape(id), "", nil, &d)
			return err == nil && d.Indexed != nil && d.Indexed.Version == d.Version, err
		}), id)
	}
}

// waitReportsSettled waits until the all-in-one's stages have nothing
// pending (the catalog's re-extractions included: they change the graph
// after the catalog's own change is applied) and the community reports c
// reads stayed the same over a period longer than the tests' quiet
// period.
func waitReportsSettled(t *testing.T, a *app.App, c *app.Client) {
	t.Helper()
	prev := ""
	eventually(t, 60*time.Second, "settled community reports", func() bool {
		time.Sleep(300 * time.Millisecond)
		n, err := a.Bus.Backlog(t.Context(), "extractor", "extractor-catalog", "resolver", "clusterer", "clusterer-requests",
			"reporter", "reporter-vectors")
		cur := fmt.Sprint(reportIDs(t, c))
		same := cur == prev
		prev = cur
		return err == nil && n == 0 && same && len(cur) > len("map[]")
	})
}

// plantDeadLetter leaves in the running all-in-one what the extractor
// leaves when it gives up on a document version: the version announced in
// the registry and its DocChanged in the extractor's dead-letter subject,
// in the form the bus writes. It returns the dead letter's sequence.
func plantDeadLetter(t *testing.T, a *app.App, id string) uint64 {
	t.Helper()
	ctx := t.Context()
	text := id + ": Image resizer ran out of disk\nimage-resizer filled its disk with thumbnails and Basket API pages lost their images.\n"
	title := id + ": Image resizer ran out of disk"
	ev := events.DocChanged{Header: events.Header{Schema: events.SchemaVersion, Tenant: "acme"}, DocID: id, Version: 1, Source: "demo", Title: title,
		Text: text, DocType: "incident", ACL: provenance.PublicACL(), OccurredAt: time.Now().UTC(), ReceivedAt: time.Now().UTC()}
	data, err := events.Encode(&ev)
	require.NoError(t, err)
	_, err = a.Stores.Announce(ctx, "acme", store.Announcement{DocID: id, Version: 1, ACL: provenance.PublicACL(), Source: "demo", Title: title})
	require.NoError(t, err)
	subjects := a.Bus.Subjects()
	dl := stream.DeadLetter{Stage: "extractor", Subject: subjects.For(events.KindDocChanged, "acme"), Error: "extracting: planted for the web UI test",
		Deliveries: 5, MsgID: "acme/" + id + "/1/changed", FailedAt: time.Now().UTC(), Data: data}
	body, err := json.Marshal(dl)
	require.NoError(t, err)
	msg := nats.NewMsg(subjects.DLQ("extractor"))
	msg.Data = body
	msg.Header.Set(stream.HeaderDLQStage, "extractor")
	msg.Header.Set(stream.HeaderDLQError, dl.Error)
	msg.Header.Set(jetstream.MsgIDHeader, "dlq/extractor/planted/"+id)
	ack, err := a.Bus.JetStream().PublishMsg(ctx, msg)
	require.NoError(t, err)
	return ack.Sequence
}

// The processes plantStatusFigures records figures for, besides the
// all-in-one's own: an extractor with LLM usage of one model, live for
// minutes, and a resolver whose lag samples are stale at once.
const (
	uiLLMProcess   = "extractor@ui-test:1"
	uiLLMModel     = "ui-test-model"
	uiStaleProcess = "resolver@ui-gone:2"
)

// plantStatusFigures records, as other processes would in the stats
// bucket, a live LLM figure and a stale lag figure; they are removed when
// the test ends.
func plantStatusFigures(t *testing.T, a *app.App) {
	t.Helper()
	ctx := t.Context()
	recs := map[string]map[string]any{
		"extractor_ui-test_1.llm": {"process": uiLLMProcess, "service": "extractor", "figure": "llm", "every_seconds": 60,
			"llm": map[string]any{uiLLMModel: map[string]any{"documents": 4, "calls": 6, "prompt_tokens": 4000, "completion_tokens": 900,
				"cost": 0.25, "document_calls": 6, "document_cost": 0.25}}},
		// Rewritten every millisecond: stale by the time anyone reads it.
		"resolver_ui-gone_2.lag.graph": {"process": uiStaleProcess, "service": "resolver", "figure": "lag.graph", "every_seconds": 0.001,
			"lag": []float64{99, 98, 97}},
	}
	for key, rec := range recs {
		body, err := json.Marshal(rec)
		require.NoError(t, err)
		require.NoError(t, a.Bus.PutStat(ctx, key, body))
		t.Cleanup(func() { require.NoError(t, a.Bus.DeleteStat(context.WithoutCancel(ctx), key)) })
	}
}

// uiStatus is the part of /v1/status the ops page check compares.
type uiStatus struct {
	IndexLag struct {
		Samples int `json:"samples"`
	} `json:"index_lag_seconds"`
	StageLag map[string]struct {
		Samples int `json:"samples"`
	} `json:"stage_lag_seconds"`
	LLM *struct {
		Calls   float64 `json:"calls"`
		ByModel map[string]struct {
			Documents int     `json:"documents"`
			Calls     float64 `json:"calls"`
		} `json:"by_model"`
	} `json:"llm"`
	Sources []struct {
		Process string `json:"process"`
		Service string `json:"service"`
		Figure  string `json:"figure"`
		Live    bool   `json:"live"`
	} `json:"sources"`
}

// uiOpsView is what the ops page shows of the same figures, as text.
type uiOpsView struct {
	Samples string            `json:"samples"`
	Stages  map[string]string `json:"stages"`
	Models  map[string]string `json:"models"`
	Sources []string          `json:"sources"`
	// StaleMarked counts the stale rows whose first cell has a visible
	// left border (the mark besides the words).
	StaleMarked int `json:"stale_marked"`
}

const opsViewJS = `(() => {
  const dd = (term) => { const dt = [...document.querySelectorAll("#ops-pending dt")].find((d) => d.textContent === term); return dt ? dt.nextElementSibling.textContent : ""; };
  const rows = (css) => [...document.querySelectorAll(css + " tbody tr")];
  return {
    samples: dd("Index lag samples"),
    stages: Object.fromEntries(rows("#ops-stage-lag").map((r) => [r.cells[0].textContent, r.cells[3].textContent])),
    models: Object.fromEntries(rows("#ops-llm-models").map((r) => [r.cells[0].textContent, r.cells[1].textContent + " documents, " + r.cells[2].textContent + " calls"])),
    sources: rows("#ops-sources-table").map((r) => [0, 1, 2, 4].map((i) => r.cells[i].textContent).join(" | ")),
    stale_marked: rows("#ops-sources-table").filter((r) => r.cells[4].textContent.startsWith("Stale") && parseFloat(getComputedStyle(r.cells[0]).borderLeftWidth) >= 3).length,
  };
})()`

// viewOf is what the ops page must show for st.
func viewOf(st uiStatus) uiOpsView {
	v := uiOpsView{Samples: fmt.Sprint(st.IndexLag.Samples), Stages: map[string]string{}, Models: map[string]string{}, Sources: []string{}}
	for stage, l := range st.StageLag {
		v.Stages[stage] = fmt.Sprint(l.Samples)
	}
	if st.LLM != nil {
		for m, u := range st.LLM.ByModel {
			if m == "" {
				m = "(no model label)"
			}
			v.Models[m] = fmt.Sprintf("%d documents, %s calls", u.Documents, strings.TrimSuffix(fmt.Sprintf("%.3f", u.Calls), ".000"))
		}
	}
	for _, s := range st.Sources {
		state := "Live"
		if !s.Live {
			state = "Stale: left out"
			v.StaleMarked++
		}
		v.Sources = append(v.Sources, strings.Join([]string{s.Process, s.Service, s.Figure, state}, " | "))
	}
	return v
}

// checkOpsFigures compares the ops page with /v1/status as the admin
// reads it: the lag sample counts, the LLM usage by model and the
// processes that recorded each figure, stale ones marked. The figures move
// while the pipeline works, so the page is compared with a status read
// unchanged before and after it loaded.
func checkOpsFigures(t *testing.T, ctx context.Context, admin *app.Client) {
	t.Helper()
	read := func() uiStatus {
		var st uiStatus
		require.NoError(t, admin.Do(t.Context(), http.MethodGet, "/v1/status?audit=1", "", nil, &st))
		return st
	}
	for attempt := 1; ; attempt++ {
		before := read()
		require.NoError(t, do(ctx, js(`location.hash = "#/ask"`), chromedp.WaitVisible(chromedp.ID(`question`)),
			js(`location.hash = "#/ops"`), poll(`!!document.querySelector("#ops-sources") && !!document.querySelector("#dead-letter-table")`)))
		page := eval[uiOpsView](t, ctx, opsViewJS)
		want := viewOf(read())
		if !reflect.DeepEqual(viewOf(before), want) {
			require.Less(t, attempt, 5, "the status figures kept changing while the ops page loaded")
			continue
		}
		require.Equal(t, want, page, "the ops page shows the figures of /v1/status")
		require.Contains(t, want.Sources, uiStaleProcess+" | resolver | lag.graph | Stale: left out", "the planted lag figure is stale")
		require.Contains(t, want.Sources, uiLLMProcess+" | extractor | llm | Live")
		require.Contains(t, want.Models, uiLLMModel)
		require.Positive(t, before.IndexLag.Samples, "the all-in-one records index lag samples")
		return
	}
}
