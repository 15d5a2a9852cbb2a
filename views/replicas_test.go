package views

import (
	"strings"
	"testing"
	"time"

	"switchyard/i18n"
)

// The panel mounted with a zero model is an empty placeholder whose poll fills it at once; drawn
// with a model it shows at once and its poll only follows up.
func TestReplicasPanelMount(t *testing.T) {
	doc, body := renderDoc(t, i18n.EN, ReplicasPanel(ReplicasModel{}))
	if _, hidden := doc.Find("section#replicas").Attr("hidden"); !hidden || doc.Find("#replicas-table").Length() != 0 {
		t.Fatalf("zero model: not an empty placeholder:\n%s", body)
	}
	if trigger, _ := doc.Find("#replicas-poll[data-poll]").Attr("hx-trigger"); trigger != "load, every 5s" {
		t.Fatalf("zero model: poll trigger %q", trigger)
	}

	m := ReplicasModel{Shared: true, Mode: "share", ModeText: "text", Live: 2, Version: "v1",
		Rows: []ReplicaRow{{ID: "a", Name: "gw-1", Started: time.Unix(0, 0), Live: true, Self: true}, {ID: "b", Name: "gw-2"}}}
	doc, body = renderDoc(t, i18n.DE, ReplicasPanel(m))
	if _, hidden := doc.Find("section#replicas").Attr("hidden"); hidden || doc.Find("#replicas-table tr.replica").Length() != 2 {
		t.Fatalf("model: panel not drawn:\n%s", body)
	}
	if trigger, _ := doc.Find("#replicas-poll").Attr("hx-trigger"); trigger != "every 5s" {
		t.Fatalf("model: poll trigger %q", trigger)
	}
	if v, _ := doc.Find("input#replicas-version").Attr("value"); v != "v1" {
		t.Fatalf("version %q", v)
	}
	if got := doc.Find("#replicas-live").Text(); got != "2 aktiv" {
		t.Fatalf("live badge %q", got)
	}
	if strings.Contains(doc.Text(), "replicas.") {
		t.Fatalf("a catalog key shows instead of its text:\n%s", body)
	}
}
