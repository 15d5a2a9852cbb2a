package views

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// Chart is one server-drawn chart of a time range: bars, stacked bars or lines over equal
// steps. The plot is an SVG that stretches to its box (no text inside it); the axis labels,
// legend and tooltips are HTML and SVG titles, so it reads the same at 360 px and at 1440 px
// and needs no script.
type Chart struct {
	ID       string
	Title    string
	Kind     string // "bars", "stacked" or "lines"
	Series   []ChartSeries
	MaxLabel string // the top of the axis in words ("120 ms", "12 %")
	// Starts are the steps' start times (for the axis and the tooltips).
	Starts []time.Time
	// Tips are the tooltip texts per step (all series), already in words.
	Tips    []string
	Summary string // what the chart shows, for screen readers
	// TimeStyle is how axis times are shown (see when).
	TimeStyle string
	// EmptyText says why there is nothing to draw.
	EmptyText string
	max       float64
}

// ChartSeries is one series of a chart; a negative value is a gap (no data in that step).
type ChartSeries struct {
	Name   string
	Class  string // CSS class giving its colour
	Values []float64
}

// Missing marks a step without data in a series.
const Missing = -1.0

// Scale fixes the chart's axis: the top is the largest value rounded up to 1, 2 or 5 × 10ⁿ
// (stacked bars: the largest sum); label writes a value in words. It returns the chart.
func (c Chart) Scale(label func(v float64) string) Chart {
	var top float64
	n := c.steps()
	for i := 0; i < n; i++ {
		var sum float64
		for _, s := range c.Series {
			v := value(s.Values, i)
			if c.Kind == "stacked" {
				sum += max(v, 0)
			} else {
				top = max(top, v)
			}
		}
		top = max(top, sum)
	}
	c.max = niceCeil(top)
	c.MaxLabel = label(c.max)
	return c
}

// Empty reports whether the chart has no data at all.
func (c Chart) Empty() bool { return c.max == 0 }

func (c Chart) steps() int {
	n := 0
	for _, s := range c.Series {
		n = max(n, len(s.Values))
	}
	return n
}

func value(vs []float64, i int) float64 {
	if i < len(vs) {
		return vs[i]
	}
	return Missing
}

// niceCeil rounds v up to 1, 2 or 5 × 10ⁿ (0 stays 0).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 0
	}
	exp := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*exp {
			return m * exp
		}
	}
	return 10 * exp
}

// viewBox is the plot's coordinate system: one unit per step across, 100 up.
func (c Chart) viewBox() string { return "0 0 " + strconv.Itoa(max(c.steps(), 1)) + " 100" }

// chartRect is one bar (or one part of a stacked bar) in plot coordinates.
type chartRect struct {
	X, Y, W, H string
	Class      string
}

func f2(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// bars lays out the bars (stacked: each series on top of the ones before).
func (c Chart) bars() []chartRect {
	if c.max == 0 {
		return nil
	}
	var out []chartRect
	for i := 0; i < c.steps(); i++ {
		base := 0.0
		for j, s := range c.Series {
			v := max(value(s.Values, i), 0)
			if v == 0 {
				continue
			}
			h := v / c.max * 100
			w, x := 0.7, float64(i)+0.15
			if c.Kind == "bars" && len(c.Series) > 1 { // side by side
				w = 0.8 / float64(len(c.Series))
				x = float64(i) + 0.1 + w*float64(j)
			}
			y := 100 - h
			if c.Kind == "stacked" {
				y -= base
				base += h
			}
			out = append(out, chartRect{X: f2(x), Y: f2(y), W: f2(w), H: f2(h), Class: s.Class})
		}
	}
	return out
}

// chartLine is one unbroken run of a line series.
type chartLine struct {
	Points string
	Class  string
}

// lines lays out each series as polylines, broken where a step has no data; a lone point is
// drawn as a short dash.
func (c Chart) lines() []chartLine {
	if c.max == 0 {
		return nil
	}
	var out []chartLine
	for _, s := range c.Series {
		var run []string
		flush := func() {
			if len(run) == 1 { // a lone point: a dash across its step
				p := strings.Split(run[0], ",")
				x, _ := strconv.ParseFloat(p[0], 64)
				run = []string{f2(x-0.35) + "," + p[1], f2(x+0.35) + "," + p[1]}
			}
			if len(run) > 1 {
				out = append(out, chartLine{Points: strings.Join(run, " "), Class: s.Class})
			}
			run = nil
		}
		for i := range s.Values {
			v := s.Values[i]
			if v < 0 {
				flush()
				continue
			}
			run = append(run, f2(float64(i)+0.5)+","+f2(100-v/c.max*100))
		}
		flush()
	}
	return out
}

// axisTimes are the times under the plot: the first step, the middle one and the last.
func (c Chart) axisTimes() []time.Time {
	n := len(c.Starts)
	if n == 0 {
		return nil
	}
	return []time.Time{c.Starts[0], c.Starts[n/2], c.Starts[n-1]}
}

// Sparkline is a small bar chart of counts (a provider's or a key's requests per step).
type Sparkline struct {
	Values []int64
	Label  string // for screen readers
}

func (s Sparkline) viewBox() string { return "0 0 " + strconv.Itoa(max(len(s.Values), 1)) + " 100" }

func (s Sparkline) bars() []chartRect {
	var top int64
	for _, v := range s.Values {
		top = max(top, v)
	}
	if top == 0 {
		return nil
	}
	var out []chartRect
	for i, v := range s.Values {
		if v == 0 {
			continue
		}
		h := math.Max(float64(v)/float64(top)*100, 4)
		out = append(out, chartRect{X: f2(float64(i) + 0.1), Y: f2(100 - h), W: "0.80", H: f2(h)})
	}
	return out
}
