// Package idle holds the rule that says which traffic means a person is
// using an environment: the gateway applies it to every request and
// WebSocket message, and the webhooks validate a template's rules with it,
// so both read a template the same way.
package idle

import (
	"net/http"
	"regexp"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/wsframe"
)

// PrefixLen is how much of each WebSocket message IgnoreMessages sees.
const PrefixLen = 256

// Rules are a template's compiled activity rules. The nil *Rules is the
// default: every request counts, and every WebSocket data message the
// browser sends.
type Rules struct {
	ignorePaths    []string
	minMessage     int64
	ignoreMessages []*regexp.Regexp
}

// Validate checks what the schema cannot: that IgnoreMessages are RE2
// regular expressions.
func Validate(spec *v1alpha1.IdleSpec, fldPath *field.Path) field.ErrorList {
	_, errs := compile(spec, fldPath)
	return errs
}

// Compile turns a template's idle spec into Rules. Invalid expressions
// (which the webhook rejects, but which may predate it) are left out, so
// what they would have ignored counts.
func Compile(spec *v1alpha1.IdleSpec) *Rules {
	r, _ := compile(spec, field.NewPath("spec", "idle"))
	return r
}

func compile(spec *v1alpha1.IdleSpec, fldPath *field.Path) (*Rules, field.ErrorList) {
	if spec == nil || spec.Activity == nil {
		return nil, nil
	}
	a := spec.Activity
	r := &Rules{ignorePaths: a.IgnorePaths}
	var errs field.ErrorList
	if ws := a.WebSocket; ws != nil {
		r.minMessage = int64(ws.MinMessageBytes)
		for i, expr := range ws.IgnoreMessages {
			re, err := regexp.Compile(expr)
			if err != nil {
				errs = append(errs, field.Invalid(fldPath.Child("activity", "webSocket", "ignoreMessages").Index(i), expr, err.Error()))
				continue
			}
			r.ignoreMessages = append(r.ignoreMessages, re)
		}
	}
	return r, errs
}

// RequestCounts reports whether a request for path (as the environment
// receives it) means a person: background reads of the app's ignored
// paths do not.
func (r *Rules) RequestCounts(method, path string) bool {
	if r == nil || (method != http.MethodGet && method != http.MethodHead) {
		return true
	}
	for _, p := range r.ignorePaths {
		if strings.HasPrefix(path, p) {
			return false
		}
	}
	return true
}

// PrefixLen is how many payload bytes of each message MessageCounts needs.
func (r *Rules) PrefixLen() int {
	if r == nil || len(r.ignoreMessages) == 0 {
		return 0
	}
	return PrefixLen
}

// FiltersMessages is true when the rules look at WebSocket messages beyond
// their kind; the gateway then asks environments not to compress them.
func (r *Rules) FiltersMessages() bool {
	return r != nil && (r.minMessage > 0 || len(r.ignoreMessages) > 0)
}

// MessageCounts reports whether a message the browser sent means a person.
// Control frames (ping, pong, close) never do. A compressed message is
// judged by its kind alone, as its bytes cannot be read.
func (r *Rules) MessageCounts(m wsframe.Message) bool {
	if m.IsControl() {
		return false
	}
	if r == nil || m.Compressed {
		return true
	}
	if m.Length < r.minMessage {
		return false
	}
	for _, re := range r.ignoreMessages {
		if re.Match(m.Prefix) {
			return false
		}
	}
	return true
}

// Cache compiles each template's rules once. It is keyed by the spec's
// address: the gateway's cache hands out the same object until the
// template changes, and a changed template is a new object.
type Cache struct {
	mu    sync.Mutex
	rules map[*v1alpha1.IdleSpec]*Rules
}

// maxCached bounds the cache; past it, it starts over.
const maxCached = 4096

// Get returns the compiled rules of spec.
func (c *Cache) Get(spec *v1alpha1.IdleSpec) *Rules {
	if spec == nil || spec.Activity == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.rules[spec]; ok {
		return r
	}
	if c.rules == nil || len(c.rules) >= maxCached {
		c.rules = map[*v1alpha1.IdleSpec]*Rules{}
	}
	r := Compile(spec)
	c.rules[spec] = r
	return r
}
