package main

import (
	"fmt"
	"strconv"
	"time"
)

// warmTarget is the bound on a warmed class start: the
// environments are Ready before anyone arrives, so sign-in → first byte
// is the gateway's own work.
const warmTarget = time.Second

// coldSlack is how much slower than the plain class start (shipped limits,
// same run) the cold course start may be and still count as no worse:
// the two differ in size and mix, and runs on a shared machine vary.
const coldSlack = 1.10

// classWarmTargets are the scenario's rows in the targets table; class is
// the plain class start of the same run, the cold bound's reference.
func classWarmTargets(p func(string, ...any), warm []classWarmResult, class []classResult) {
	var cold, warmed *classFigures
	for _, r := range warm {
		f := figures(classResult{Students: r.Students})
		if r.Warmed {
			warmed = &f
		} else {
			cold = &f
		}
	}
	if warmed != nil {
		ref, ratio := "—", "—"
		if cold != nil {
			ref = "cold p99 " + secs(cold.Total.P99)
			ratio = ratioOf(warmed.Total.P99, cold.Total.P99)
		}
		p("| class start of a course warmed by its timetable: sign-in to first byte, p99 | ≤ 1 s (Ready before the class arrives) | %s (p50 %s, %d of %d reached, %d errors) | %s | %s | %s |",
			secs(warmed.Total.P99), secs(warmed.Total.P50), warmed.Reached, len(warm[len(warm)-1].Students), warmed.Errors, ref, ratio, verdict(warmed.Total.P99 <= warmTarget && warmed.Errors == 0))
	}
	if cold != nil {
		ref, ratio, v := "no plain class start in this run", "—", "not judged"
		for _, r := range class {
			if r.Limits.Key == "shipped" {
				plain := figures(r).Total.P99
				ref, ratio = "plain class start (shipped limits) p99 "+secs(plain), ratioOf(cold.Total.P99, plain)
				v = verdict(float64(cold.Total.P99) <= coldSlack*float64(plain) && cold.Errors == 0)
			}
		}
		p("| class start of a course, cold (no timetable): sign-in to first byte, p99 | no worse than today (≤ %.2f × the plain class start) | %s (p50 %s, %d reached, %d errors) | %s | %s | %s |",
			coldSlack, secs(cold.Total.P99), secs(cold.Total.P50), cold.Reached, cold.Errors, ref, ratio, v)
	}
}

func ratioOf(a, b time.Duration) string {
	if b <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", float64(a)/float64(b))
}

// classWarmSection is the scenario's part of the report.
func classWarmSection(p func(string, ...any), window time.Duration, warm []classWarmResult) {
	p("")
	p("## Class start of a course, cold and warmed by its timetable")
	p("")
	p("A course of %d students, each with an environment of the course (labelled into it, as its roster provisions them) not started yet, as before the term's first class. The students sign in within %s, in the plain class start's shuffled order, each through the gateway's sign-in and hand-off to their environment's own origin, then the app's first requests (three subresources and a WebSocket). Cold: nothing else. Warmed: a dated session starting about 3 minutes later is added to `spec.schedule` (default 10-minute warm-up, so the warm-up has begun), and the storm starts once the controller has started every environment. Controller and gateway as the chart runs them, with the shipped client limits; the upstream is the bench's echo app, since kwok's pods serve nothing.", len(warm[0].Students), window)
	p("")
	p("| run | warm-up (schedule written → all Ready) | status warm | sign-in → first byte p50 | p95 | p99 | max | reached | errors | progress pages per student |")
	p("|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range warm {
		f := figures(classResult{Students: r.Students})
		name, took, status := "cold", "—", "—"
		if r.Warmed {
			name, took, status = "warmed", secs(r.WarmedIn), strconv.Itoa(int(r.Warm))
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %d of %d | %d | %.2f |", name, took, status,
			secs(f.Total.P50), secs(f.Total.P95), secs(f.Total.P99), secs(f.Total.Max), f.Reached, len(r.Students), f.Errors, f.ProgressPages)
		for _, e := range f.ErrorSamples {
			p("")
			p("- %s error sample: %s", name, e)
		}
	}
}
