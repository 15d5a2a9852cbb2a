package metrics

import (
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// fill records one of each kind of sample, a state gauge registered after New included.
func fill(m *Metrics) {
	m.Request("/v1/chat/completions", 200, "openai", "gpt-x", time.Second)
	m.Spend("agent", "openai", "gpt-x", 10, 5, 0, 0, 0, 0.01, true)
	m.QueueWait("openai", "main", "ok", time.Millisecond)
	m.RegisterStateGauge("switchyard_test_state", "A state read at scrape time.", []string{"provider"},
		func() []GaugeSample { return []GaugeSample{{Labels: []string{"openai"}, Value: 1}} })
}

func labelsOf(s *dto.Metric) map[string][]string {
	out := map[string][]string{}
	for _, l := range s.GetLabel() {
		out[l.GetName()] = append(out[l.GetName()], l.GetValue())
	}
	return out
}

func familyNames(fams map[string]*dto.MetricFamily) []string {
	var out []string
	for name := range fams {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// With a replica id and LabelSeries, every series of every family (the Go, process and handler series too)
// carries replica="<id>" once, and switchyard_replica_info{replica, name} is 1; the families
// are those of a single replica plus the info gauge. Scraping again works (the handler is made
// once).
func TestReplicaLabelOnEverySeries(t *testing.T) {
	m := NewWith(Options{Replica: "3f9a0c1d2e4b5a69", ReplicaName: "gw-1 :8080", LabelSeries: true})
	fill(m)
	exposition(t, m)
	fams := exposition(t, m)

	info, ok := fams["switchyard_replica_info"]
	if !ok || info.GetType() != dto.MetricType_GAUGE || len(info.GetMetric()) != 1 {
		t.Fatalf("switchyard_replica_info: %v", info)
	}
	if l := labelsOf(info.GetMetric()[0]); len(l) != 2 || l["replica"][0] != "3f9a0c1d2e4b5a69" || l["name"][0] != "gw-1 :8080" ||
		info.GetMetric()[0].GetGauge().GetValue() != 1 {
		t.Fatalf("switchyard_replica_info sample %v", info.GetMetric()[0])
	}
	for name, fam := range fams {
		for _, s := range fam.GetMetric() {
			if got := labelsOf(s)["replica"]; len(got) != 1 || got[0] != "3f9a0c1d2e4b5a69" {
				t.Errorf("%s%v: replica label %v", name, s.GetLabel(), got)
			}
		}
	}

	single := New()
	fill(single)
	exposition(t, single)
	want := append(familyNames(exposition(t, single)), "switchyard_replica_info")
	slices.Sort(want)
	if got := familyNames(fams); !slices.Equal(got, want) {
		t.Errorf("families with a replica id:\n%v\nwant those of one replica and the info gauge:\n%v", got, want)
	}
}

// Without LabelSeries nothing carries a replica label but the info gauge, which a replica id
// alone adds; without a replica id there is no info gauge either: one replica's exposition is
// unchanged.
func TestNoReplicaLabelByDefault(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  Options
		info bool
	}{
		{"no options", Options{}, false},
		{"label without an id", Options{LabelSeries: true}, false},
		{"an id alone", Options{Replica: "3f9a0c1d2e4b5a69", ReplicaName: "gw-1 :8080"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewWith(tc.opt)
			fill(m)
			fams := exposition(t, m)
			if _, ok := fams["switchyard_replica_info"]; ok != tc.info {
				t.Errorf("switchyard_replica_info present %v, want %v", ok, tc.info)
			}
			if len(fams) < 20 {
				t.Fatalf("only %d families: the scrape is wrong", len(fams))
			}
			for name, fam := range fams {
				for _, s := range fam.GetMetric() {
					if _, ok := labelsOf(s)["replica"]; ok && name != "switchyard_replica_info" {
						t.Errorf("%s carries a replica label", name)
					}
				}
			}
		})
	}
}
