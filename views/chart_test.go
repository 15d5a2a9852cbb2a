package views

import (
	"strings"
	"testing"
)

func TestNiceCeil(t *testing.T) {
	cases := []struct{ in, want float64 }{{0, 0}, {0.3, 0.5}, {1, 1}, {3, 5}, {7, 10}, {12, 20}, {150, 200}, {999, 1000}}
	for _, c := range cases {
		if got := niceCeil(c.in); got != c.want {
			t.Errorf("niceCeil(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestChartGeometry(t *testing.T) {
	label := func(v float64) string { return "" }
	stacked := Chart{Kind: "stacked", Series: []ChartSeries{
		{Class: "a", Values: []float64{10, 0, 30}},
		{Class: "b", Values: []float64{10, 0, 20}},
	}}.Scale(label)
	if stacked.max != 50 {
		t.Fatalf("the top of stacked bars is the largest sum rounded up: %v", stacked.max)
	}
	bars := stacked.bars()
	if len(bars) != 4 {
		t.Fatalf("%d bars, want 4 (none for zero)", len(bars))
	}
	// In the third step b sits on a: a from 100 up to 40, b from 40 up to 0.
	if a, b := bars[2], bars[3]; a.Y != "40.00" || a.H != "60.00" || b.Y != "0.00" || b.H != "40.00" {
		t.Fatalf("stacked step: %+v %+v", a, b)
	}

	lines := Chart{Kind: "lines", Series: []ChartSeries{{Class: "p", Values: []float64{1, 2, Missing, 4, Missing}}}}.Scale(label)
	got := lines.lines()
	if len(got) != 2 {
		t.Fatalf("a gap breaks the line in two: %+v", got)
	}
	if got[0].Points != "0.50,80.00 1.50,60.00" || !strings.HasPrefix(got[1].Points, "3.15,20.00 3.85,20.00") {
		t.Fatalf("lines %+v (a lone point is a dash across its step)", got)
	}
	if empty := (Chart{Kind: "bars", Series: []ChartSeries{{Values: []float64{0, 0}}}}).Scale(label); !empty.Empty() || empty.bars() != nil {
		t.Fatal("a chart without data is empty")
	}
}
