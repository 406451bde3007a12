package main

import "fmt"

// realWakeTargets are the targets table's rows: each real app's wake on
// a real node beside the same wake on kwok, or why it was not run.
func realWakeTargets(p func(string, ...any), rw *realWakeResult) {
	if rw == nil {
		return
	}
	for _, a := range realApps {
		k := rw.Kwok[a.template]
		kwok := "kwok: " + wakeCell(k)
		if rw.NotRun != "" {
			p("| wake on request on a real node, %s: stopped → first byte of the app's answer | no target set | **NOT RUN: %s** | %s | — | — |", a.template, rw.NotRun, kwok)
			continue
		}
		r := rw.Real[a.template]
		ratio := "—"
		if r.Err == "" && k.Err == "" && k.Wake.FirstByte > 0 {
			ratio = fmt.Sprintf("%.0f", r.Wake.FirstByte.Seconds()/k.Wake.FirstByte.Seconds())
		}
		p("| wake on request on a real node, %s: stopped → first byte of the app's answer | no target set | %s | %s | %s | — |", a.template, wakeCell(r), kwok, ratio)
	}
}

// wakeCell is one side's measurement.
func wakeCell(w appWake) string {
	if w.Err != "" {
		return "**FAILED: " + w.Err + "**"
	}
	return fmt.Sprintf("%s (%s; pod created → Ready %s)", secs(w.Wake.FirstByte), w.Wake.Requests(), w.Pod)
}

// realWakeSection explains the rows and gives each side's detail.
func realWakeSection(p func(string, ...any), rw *realWakeResult) {
	if rw == nil {
		return
	}
	p("")
	p("### Wake on request on a real node")
	p("")
	p("`userland dev`'s stack (the controller and the gateway in one process on this machine) runs once on kwok and once with its pods on one real node (internal/realnode: containerd, kubelet, kube-proxy, kube-router's firewall, CoreDNS), with the sample templates' real apps built locally (hack/build-app-images.sh). Each demo environment is opened once as its owner through the gateway, then stopped as idle by the controller (its last activity and last start moved two hours back: the Deployment scaled to 0 and its pod gone), then woken by one plain request through the gateway, timed from sending it to the first byte of an answer holding the app's own content (a pod can be Ready before its app serves: the 502s or 503s before are counted as requests). On kwok the built-in demo app answers. The pod's own time is from its creation to its Ready condition, in whole seconds as the API server keeps them.")
	p("")
	if rw.NotRun != "" {
		p("**Not run on a real node: %s.** Only kwok's side was measured.", rw.NotRun)
		p("")
	}
	p("| app | real node: idle stop | real node: stopped → first byte | kwok: idle stop | kwok: stopped → first byte |")
	p("|---|---|---|---|---|")
	for _, a := range realApps {
		r, k := rw.Real[a.template], rw.Kwok[a.template]
		real, stop := "not run", "not run"
		if rw.NotRun == "" {
			real, stop = wakeCell(r), secs(r.Stop)
			if r.Err != "" {
				stop = "—"
			}
		}
		p("| %s (%s) | %s | %s | %s | %s |", a.template, a.path, stop, real, secs(k.Stop), wakeCell(k))
	}
}
