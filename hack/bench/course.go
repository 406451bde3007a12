package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/testobj"
)

// courseResult is a course of N listed students provisioned while N
// plain Userlands are created beside it, in one namespace and one run.
type courseResult struct {
	N int
	// PlainReady is how long the plain Userlands took to be all Ready
	// with the course provisioning beside them.
	PlainReady time.Duration
	// CourseProvisioned is how long until the course's status counted
	// every student provisioned and every course environment was set up
	// (stopped until first use).
	CourseProvisioned time.Duration
	// Counts are the controller's API requests over the whole run.
	Counts     map[string]int
	CPUSeconds float64
	PeakKiB    int64
}

// courseBeside creates a template, then at once n plain Userlands and a
// course listing n students with the template up front, and waits for
// both.
func courseBeside(ctx context.Context, c client.Client, n, pid int, auditLog string) (courseResult, error) {
	r := courseResult{N: n}
	ns := fmt.Sprintf("course-%d", n)
	if err := namespace(ctx, c, ns); err != nil {
		return r, err
	}
	if err := c.Create(ctx, benchTemplate(ns)); err != nil {
		return r, err
	}
	students := make([]string, n)
	for i := range students {
		students[i] = fmt.Sprintf("course-student%d@uni.example.ac.jp", i)
	}
	crs := testobj.MakeCourse(ns, "bench").Students(students...).Template("app", v1alpha1.ProvisionUpFront).Obj()
	cpu0 := cpuSeconds(pid)
	t0 := time.Now()
	var wg sync.WaitGroup
	var plainErr, courseErr error
	wg.Go(func() {
		if plainErr = createAll(ctx, n, func(i int) []client.Object { return []client.Object{benchUserland(ns, i)} }, c); plainErr != nil {
			return
		}
		plainErr = waitUserlands(ctx, c, ns, n, func(ul *v1alpha1.Userland) bool {
			return ul.Labels[v1alpha1.LabelCourse] == "" && ul.Status.Phase == v1alpha1.PhaseReady
		})
		r.PlainReady = time.Since(t0)
	})
	wg.Go(func() {
		if courseErr = c.Create(ctx, crs); courseErr != nil {
			return
		}
		courseErr = waitUserlands(ctx, c, ns, n, func(ul *v1alpha1.Userland) bool {
			return ul.Labels[v1alpha1.LabelCourse] == "bench" && ul.Status.Phase == v1alpha1.PhaseStopped && ul.Status.ObservedGeneration == ul.Generation
		})
		if courseErr != nil {
			return
		}
		courseErr = waitAll(ctx, c, &v1alpha1.CourseList{}, ns, 1, func(obj client.Object) bool {
			return obj.(*v1alpha1.Course).Status.Provisioned == int32(n)
		})
		r.CourseProvisioned = time.Since(t0)
	})
	wg.Wait()
	if plainErr != nil || courseErr != nil {
		return r, fmt.Errorf("course beside plain Userlands: %w", errors.Join(plainErr, courseErr))
	}
	r.CPUSeconds = cpuSeconds(pid) - cpu0
	_, r.PeakKiB = memory(pid)
	time.Sleep(2 * time.Second) // audit entries of the last requests
	var err error
	r.Counts, err = apiCounts(auditLog, controllerUser, t0, time.Now())
	return r, err
}

// courseSection reports the course scenario.
func courseSection(p func(string, ...any), r *courseResult) {
	p("## A course beside plain Userlands")
	p("")
	p("One namespace: %d plain Userlands created (16 at a time) while a Course listing %d students, with the same template up front, is created at the same moment. The course's environments are made stopped (each starts when its student first opens it), so the cluster runs only the plain ones.", r.N, r.N)
	p("")
	p("| measure | value |")
	p("|---|---|")
	p("| plain Userlands all Ready | %s |", r.PlainReady.Round(time.Millisecond))
	p("| course: every student provisioned (status counts them, every environment set up and Stopped) | %s |", r.CourseProvisioned.Round(time.Millisecond))
	p("| controller writes, both together | %d (%.2f per Userland) |", writes(r.Counts), float64(writes(r.Counts))/float64(2*r.N))
	p("| controller CPU | %.1f s |", r.CPUSeconds)
	p("| controller peak RSS | %.1f MiB |", float64(r.PeakKiB)/1024)
	p("")
	p("Requests by verb and resource:")
	p("")
	p("| request | count |")
	p("|---|---|")
	for _, k := range sortedKeys(r.Counts) {
		p("| %s | %d |", k, r.Counts[k])
	}
	p("")
}
