package main

import (
	"math"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// studentRun is what one student's arrival produced: the times the driver
// saw and, from the audit log and a pod watch, the times each part of the
// cluster acted for them.
type studentRun struct {
	User, Userland string
	// New is a student whose environment is auto-provisioned at sign-in;
	// the others come back to one stopped for idleness.
	New bool
	// SignIn is when the sign-in form was posted; FirstByte when the
	// environment's own answer to the page arrived (zero: never).
	SignIn, FirstByte time.Time
	// GatewayWrite is the gateway's write that starts the environment (the
	// wake's activity, or the new Userland); ControllerWrite the
	// controller's first write of its Deployment after that; PodCreated
	// and PodReady when the pod watch saw the pod appear and turn Ready.
	GatewayWrite, ControllerWrite, PodCreated, PodReady time.Time
	// ProgressPages counts progress pages shown before the environment.
	ProgressPages int
	// Errors are the answers that were neither the environment, a
	// redirect nor a progress page, and failed requests.
	Errors []string
}

// stageNames name the parts of a student's wait, in order.
var stageNames = []string{"gateway write", "controller reaction", "pod Ready", "first proxied byte"}

// Total is sign-in to the environment's first byte.
func (s studentRun) Total() (time.Duration, bool) {
	if s.SignIn.IsZero() || s.FirstByte.IsZero() {
		return 0, false
	}
	return s.FirstByte.Sub(s.SignIn), true
}

// Stages splits Total at the gateway's write, the controller's write and
// the pod's readiness; false when one of them was not seen.
func (s studentRun) Stages() ([]time.Duration, bool) {
	marks := []time.Time{s.SignIn, s.GatewayWrite, s.ControllerWrite, s.PodReady, s.FirstByte}
	out := make([]time.Duration, 0, len(stageNames))
	for i := 1; i < len(marks); i++ {
		if marks[i].IsZero() || marks[i-1].IsZero() {
			return nil, false
		}
		out = append(out, marks[i].Sub(marks[i-1]))
	}
	return out, true
}

// PodOwn is the pod's own time from creation to Ready.
func (s studentRun) PodOwn() (time.Duration, bool) {
	if s.PodCreated.IsZero() || s.PodReady.IsZero() {
		return 0, false
	}
	return s.PodReady.Sub(s.PodCreated), true
}

// summary is a distribution's percentiles.
type summary struct {
	N                  int
	P50, P95, P99, Max time.Duration
}

// summarize is the nearest-rank percentiles of ds.
func summarize(ds []time.Duration) summary {
	if len(ds) == 0 {
		return summary{}
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := func(p float64) time.Duration { return s[max(0, int(math.Ceil(p*float64(len(s))))-1)] }
	return summary{N: len(s), P50: rank(0.50), P95: rank(0.95), P99: rank(0.99), Max: s[len(s)-1]}
}

// histogram is a Prometheus histogram summed over its label sets, with
// cumulative bucket counts by upper bound.
type histogram struct {
	Count   uint64
	Sum     float64
	Buckets map[float64]uint64
}

// histogramOf sums the named histogram of families whose labels match.
func histogramOf(families map[string]*dto.MetricFamily, name string, match func(labels map[string]string) bool) histogram {
	h := histogram{Buckets: map[float64]uint64{}}
	fam, ok := families[name]
	if !ok {
		return h
	}
	for _, m := range fam.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if match != nil && !match(labels) {
			continue
		}
		hg := m.GetHistogram()
		h.Count += hg.GetSampleCount()
		h.Sum += hg.GetSampleSum()
		for _, b := range hg.GetBucket() {
			h.Buckets[b.GetUpperBound()] += b.GetCumulativeCount()
		}
	}
	return h
}

// minus is what was observed between snapshot b and h.
func (h histogram) minus(b histogram) histogram {
	d := histogram{Count: h.Count - b.Count, Sum: h.Sum - b.Sum, Buckets: map[float64]uint64{}}
	for le, n := range h.Buckets {
		d.Buckets[le] = n - b.Buckets[le]
	}
	return d
}

// Above counts observations greater than bound, which must be a bucket's.
func (h histogram) Above(bound float64) uint64 { return h.Count - h.Buckets[bound] }

// Quantile is the upper bound of the bucket holding the q-quantile
// (+Inf when it lies beyond the last bucket); 0 for no observations.
func (h histogram) Quantile(q float64) float64 {
	if h.Count == 0 {
		return 0
	}
	bounds := make([]float64, 0, len(h.Buckets))
	for le := range h.Buckets {
		bounds = append(bounds, le)
	}
	sort.Float64s(bounds)
	want := uint64(math.Ceil(q * float64(h.Count)))
	for _, le := range bounds {
		if h.Buckets[le] >= want {
			return le
		}
	}
	return math.Inf(1)
}

// rate is a client's writes over a window.
type rate struct {
	Total int
	// PerSecond is the mean; Peak the busiest whole second.
	PerSecond, Peak float64
}

// rateOf counts times in [from, to).
func rateOf(times []time.Time, from, to time.Time) rate {
	perSecond := map[int64]int{}
	r := rate{}
	for _, t := range times {
		if t.Before(from) || !t.Before(to) {
			continue
		}
		r.Total++
		perSecond[int64(t.Sub(from)/time.Second)]++
	}
	if secs := to.Sub(from).Seconds(); secs > 0 {
		r.PerSecond = float64(r.Total) / secs
	}
	for _, n := range perSecond {
		r.Peak = max(r.Peak, float64(n))
	}
	return r
}

// podOwner is the Deployment a pod's generated name comes from:
// <deployment>-<template hash>-<suffix>.
func podOwner(pod string) string {
	i := strings.LastIndex(pod, "-")
	if i < 0 {
		return ""
	}
	j := strings.LastIndex(pod[:i], "-")
	if j < 0 {
		return ""
	}
	return pod[:j]
}

// apiRecord is one audited request.
type apiRecord struct {
	User, Verb, Resource, Subresource, Namespace, Name string
	Received, Done                                     time.Time
}

// Write reports a request that changes something.
func (r apiRecord) Write() bool {
	switch r.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// podTimes is when the pod watch saw a pod appear and turn Ready.
type podTimes struct{ Created, Ready time.Time }

// attribute fills in each student's gateway write, controller write and
// pod from the audit records (in log order) and the pods seen, matching
// each to the student's Userland and taking the first after the step
// before it.
func attribute(students []studentRun, records []apiRecord, pods map[string]podTimes, gatewayUser, controllerUser string) {
	for i := range students {
		s := &students[i]
		for _, r := range records {
			if r.Name != s.Userland || !r.Write() {
				continue
			}
			switch {
			case s.GatewayWrite.IsZero() && r.User == gatewayUser && r.Resource == "userlands" && !r.Done.Before(s.SignIn):
				s.GatewayWrite = r.Done
			case !s.GatewayWrite.IsZero() && s.ControllerWrite.IsZero() && r.User == controllerUser &&
				r.Resource == "deployments" && r.Subresource == "" && !r.Done.Before(s.GatewayWrite):
				s.ControllerWrite = r.Done
			}
		}
		if s.ControllerWrite.IsZero() {
			continue
		}
		for name, p := range pods {
			if podOwner(name) != s.Userland || p.Created.Before(s.ControllerWrite) {
				continue
			}
			if s.PodCreated.IsZero() || p.Created.Before(s.PodCreated) {
				s.PodCreated, s.PodReady = p.Created, p.Ready
			}
		}
	}
}
