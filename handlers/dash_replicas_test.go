package handlers

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/labstack/echo/v4"

	"switchyard/i18n"
	"switchyard/services/replicas"
)

// fakeReplicas is a registry's answers.
type fakeReplicas struct {
	list []replicas.Replica
	mode string
	live int
}

func (f *fakeReplicas) List() []replicas.Replica { return f.list }
func (f *fakeReplicas) Mode() string             { return f.mode }
func (f *fakeReplicas) Live() int                { return f.live }

// pollReplicas answers GET /overview/replicas?v=version in lang.
func pollReplicas(t *testing.T, h *Replicas, lang i18n.Lang, version string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/overview/replicas?v="+version, nil)
	req = req.WithContext(i18n.WithLang(req.Context(), lang))
	rec := httptest.NewRecorder()
	if err := h.Panel(echo.New().NewContext(req, rec)); err != nil {
		t.Fatal(err)
	}
	return rec
}

func parseReplicasPoll(t *testing.T, body string) *goquery.Document {
	t.Helper()
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// The poll draws the replicas (this one marked, a silent one flagged), the cap mode in words in
// the reader's language, and the version; the same version again is 204. The panel stays hidden
// for one replica on its own store, and shows once a second one runs on it.
func TestReplicasPanel(t *testing.T) {
	started := time.Date(2026, 12, 3, 9, 30, 0, 0, time.UTC)
	two := []replicas.Replica{
		{ID: "aaaa", Name: "gw-1 :8080", Addr: ":8080", Version: "v1.4.0", CapMode: replicas.ModeShare, Started: started,
			HeartbeatAge: 300 * time.Millisecond, Live: true, Self: true},
		{ID: "bbbb", Name: "gw-2 :8080", Addr: ":8080", Version: "v1.4.0", CapMode: replicas.ModeShare, Started: started,
			HeartbeatAge: 7 * time.Second},
	}
	for _, tc := range []struct {
		name  string
		reg   ReplicaLister
		shown bool
		lang  i18n.Lang
		mode  string
		rows  string
	}{
		{name: "shared store, two replicas", reg: &fakeReplicas{list: two, mode: replicas.ModeShare, live: 1}, shown: true,
			lang: i18n.EN, mode: "Each replica enforces ⌈cap ÷ live replicas⌉ (1 live)",
			rows: "aaaa gw-1 :8080 this replica|0 s ago;bbbb gw-2 :8080|7 s ago silent"},
		{name: "the same in German", reg: &fakeReplicas{list: two, mode: replicas.ModeShare, live: 1}, shown: true,
			lang: i18n.DE, mode: "Jedes Replikat setzt ⌈Limit ÷ aktive Replikate⌉ durch (1 aktiv)",
			rows: "aaaa gw-1 :8080 dieses Replikat|vor 0 s;bbbb gw-2 :8080|vor 7 s verstummt"},
		{name: "redis, this replica alone", reg: &fakeReplicas{list: two[:1], mode: replicas.ModeRedis, live: 1}, shown: true,
			lang: i18n.EN, mode: "Global caps in Redis", rows: "aaaa gw-1 :8080 this replica|0 s ago"},
		{name: "two replicas on one SQLite file", reg: &fakeReplicas{list: two, mode: replicas.ModeSingle, live: 2}, shown: true,
			lang: i18n.EN, mode: "Single replica", rows: "aaaa gw-1 :8080 this replica|0 s ago;bbbb gw-2 :8080|7 s ago silent"},
		{name: "one replica on its own store", reg: &fakeReplicas{list: two[:1], mode: replicas.ModeSingle, live: 1}, lang: i18n.EN},
		{name: "no registry", lang: i18n.EN},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &Replicas{Registry: tc.reg}
			rec := pollReplicas(t, h, tc.lang, "")
			if rec.Code != http.StatusOK || rec.Header().Get("Cache-Control") != "no-store" {
				t.Fatalf("status %d, Cache-Control %q", rec.Code, rec.Header().Get("Cache-Control"))
			}
			doc := parseReplicasPoll(t, rec.Body.String())
			panel := doc.Find("section#replicas[hx-swap-oob]")
			version, _ := doc.Find("input#replicas-version[hx-swap-oob]").Attr("value")
			if panel.Length() != 1 || version == "" {
				t.Fatalf("no out-of-band panel and version:\n%s", rec.Body)
			}
			if _, hidden := panel.Attr("hidden"); hidden == tc.shown {
				t.Fatalf("hidden %v, want shown %v:\n%s", hidden, tc.shown, rec.Body)
			}
			if tc.shown {
				if got := strings.TrimSpace(panel.Find("#replicas-mode").Text()); got != tc.mode {
					t.Errorf("mode %q, want %q", got, tc.mode)
				}
				var rows []string
				panel.Find("tr.replica").Each(func(_ int, tr *goquery.Selection) {
					id, _ := tr.Attr("data-replica")
					cells := tr.Find("td")
					rows = append(rows, id+" "+strings.Join(strings.Fields(cells.First().Text()), " ")+"|"+
						strings.Join(strings.Fields(cells.Last().Text()), " "))
				})
				if got := strings.Join(rows, ";"); got != tc.rows {
					t.Errorf("rows\n%s\nwant\n%s", got, tc.rows)
				}
				if n := panel.Find("tr[data-self]").Length(); n != 1 {
					t.Errorf("%d rows marked as this replica", n)
				}
				if started, _ := panel.Find("tr.replica time").First().Attr("datetime"); started != "2026-12-03T09:30:00Z" {
					t.Errorf("started %q", started)
				}
			} else if strings.TrimSpace(panel.Text()) != "" {
				t.Errorf("a hidden panel with content: %s", rec.Body)
			}
			if again := pollReplicas(t, h, tc.lang, version); again.Code != http.StatusNoContent {
				t.Errorf("the same state again answered %d, want 204", again.Code)
			}
		})
	}
}

// A heartbeat that ages is a change of what the panel shows: the version moves.
func TestReplicasPanelVersionFollowsHeartbeats(t *testing.T) {
	reg := &fakeReplicas{mode: replicas.ModeShare, live: 1,
		list: []replicas.Replica{{ID: "aaaa", Name: "gw-1", Live: true, Self: true}}}
	h := &Replicas{Registry: reg}
	before := h.Model(t.Context()).Version
	reg.list[0].HeartbeatAge = 2 * time.Second
	if after := h.Model(t.Context()).Version; after == before {
		t.Fatal("the version did not change with the heartbeat's age")
	}
}
