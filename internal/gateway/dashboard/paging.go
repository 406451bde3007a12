package dashboard

import (
	"errors"
	"net/url"
	"strconv"
)

// The list pages (all environments, a course's roster) show at most
// DefaultLimit rows a page unless the query asks for up to MaxLimit: a
// page of a 10,000-row list stays a page, whatever the URL says.
const (
	DefaultLimit = 100
	MaxLimit     = 500
	// maxFilterLen bounds every free-text or choice filter value; longer
	// is no name Kubernetes or an identity provider would give, only
	// work for the server.
	maxFilterLen = 256
	// maxIdleMinutes (100 years) keeps the idle filter's duration from
	// overflowing.
	maxIdleMinutes = 100 * 365 * 24 * 60
)

// errQuery is a list page's query it will not serve; the page answers
// 400 with the message.
type errQuery struct{ msg string }

func (e errQuery) Error() string { return e.msg }

// isQueryError reports whether err is a refused query (a 400).
func isQueryError(err error) bool { return errors.As(err, new(errQuery)) }

// paging reads "page" (1-based, default 1) and "limit" (default
// DefaultLimit, at most MaxLimit). Malformed or non-positive values are
// refused; a page past the end is clamped later, by paginate, once the
// number of rows the viewer may see is known.
func paging(q url.Values) (page, limit int, err error) {
	page, limit = 1, DefaultLimit
	if s := q.Get("page"); s != "" {
		if page, err = strconv.Atoi(s); err != nil || page < 1 {
			return 0, 0, errQuery{"page must be a whole number from 1"}
		}
	}
	if s := q.Get("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil || limit < 1 {
			return 0, 0, errQuery{"limit must be a whole number from 1"}
		}
		limit = min(limit, MaxLimit)
	}
	return page, limit, nil
}

// filterValue is q's value for key, refused when longer than
// maxFilterLen.
func filterValue(q url.Values, key string) (string, error) {
	v := q.Get(key)
	if len(v) > maxFilterLen {
		return "", errQuery{key + " is too long"}
	}
	return v, nil
}

// oneOf is q's value for key when it is empty or one of choices.
func oneOf(q url.Values, key string, choices []string) (string, error) {
	v := q.Get(key)
	if v == "" {
		return "", nil
	}
	for _, c := range choices {
		if v == c {
			return v, nil
		}
	}
	return "", errQuery{key + " must be one of the choices offered"}
}

// idleMinutes reads the admin page's "idle" filter: empty is none.
func idleMinutes(q url.Values) (int, error) {
	s := q.Get("idle")
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, errQuery{"idle must be a whole number of minutes"}
	}
	return min(n, maxIdleMinutes), nil
}

// Pager is what a list page shows about its pages. Everything in it
// comes from the rows the viewer may see (Total), never the cluster's.
type Pager struct {
	// Page is the page shown (1-based) of Pages; Total rows match.
	Page, Pages, Total int
	// From and To number the rows shown, 1-based; both 0 when none.
	From, To int
	// First, Prev, Next and Last are links keeping the filters, empty
	// when they would lead nowhere new.
	First, Prev, Next, Last string
	// Near are links to the pages around this one.
	Near []PageLink
}

// PageLink is one numbered page link.
type PageLink struct {
	N       int
	URL     string
	Current bool
}

// nearPages is how many numbered links are shown on each side of the
// current page.
const nearPages = 3

// paginate places the page asked for in a list of total rows, clamping a
// page past the end to the last one. It returns the pager and the
// half-open range [lo, hi) of rows to show. Links are path with query,
// whose "page" is replaced and whose "limit" is kept only when it is not
// the default.
func paginate(path string, query url.Values, total, page, limit int) (p Pager, lo, hi int) {
	pages := max(1, (total+limit-1)/limit)
	page = min(max(page, 1), pages)
	lo = min((page-1)*limit, total)
	hi = min(lo+limit, total)
	p = Pager{Page: page, Pages: pages, Total: total}
	if hi > lo {
		p.From, p.To = lo+1, hi
	}
	link := func(n int) string {
		q := url.Values{}
		for k, vs := range query {
			if k != "page" && k != "limit" && len(vs) > 0 && vs[0] != "" {
				q.Set(k, vs[0])
			}
		}
		if limit != DefaultLimit {
			q.Set("limit", strconv.Itoa(limit))
		}
		if n > 1 {
			q.Set("page", strconv.Itoa(n))
		}
		if len(q) == 0 {
			return path
		}
		return path + "?" + q.Encode()
	}
	if page > 1 {
		p.First, p.Prev = link(1), link(page-1)
	}
	if page < pages {
		p.Next, p.Last = link(page+1), link(pages)
	}
	if pages > 1 {
		for n := max(1, page-nearPages); n <= min(pages, page+nearPages); n++ {
			p.Near = append(p.Near, PageLink{N: n, URL: link(n), Current: n == page})
		}
	}
	return p, lo, hi
}
