package query

import (
	"math"
	"net/http"
)

// maxPageParam bounds the paging parameters (limit, offset, members,
// member_offset), as GET /v1/entities bounds its offset: any real list is
// shorter, and the bound keeps the arithmetic on them from overflowing.
const maxPageParam = math.MaxInt32

// window is the part of an ordered list a request asks for: offset items
// skipped, then at most limit items. A parameter that is not given is
// negative: no offset skips nothing, no limit keeps the rest of the list.
type window struct {
	offset, limit int
}

// given reports whether the request gave either parameter of w.
func (w window) given() bool { return w.offset >= 0 || w.limit >= 0 }

// windowParams reads the optional window parameters limitName and
// offsetName, each an integer from 0 to maxPageParam; a bad or repeated
// value is a 400 invalid_param.
func windowParams(r *http.Request, limitName, offsetName string) (window, error) {
	limit, err := intParam(r, limitName, -1, maxPageParam)
	if err != nil {
		return window{}, err
	}
	offset, err := intParam(r, offsetName, -1, maxPageParam)
	if err != nil {
		return window{}, err
	}
	return window{offset: offset, limit: limit}, nil
}

// bounds returns the half-open range [lo, hi) of w in a list of n items.
func (w window) bounds(n int) (lo, hi int) {
	lo = min(max(w.offset, 0), n)
	hi = n
	if w.limit >= 0 {
		hi = lo + min(w.limit, n-lo)
	}
	return lo, hi
}

// pageJSON says where the page a bounded response carries lies in the
// whole list: its exact length (total), the items skipped (offset), the
// limit asked for (absent when none was) and the offset of the next page,
// so a client pages on without counting. next_offset is absent on the
// last page, and with limit 0 (a request for the total alone), where it
// would name the same page again and a client following it never stop.
type pageJSON struct {
	Total      int  `json:"total"`
	Offset     int  `json:"offset"`
	Limit      *int `json:"limit,omitempty"`
	NextOffset *int `json:"next_offset,omitempty"`
}

// page describes w in a list of total items.
func (w window) page(total int) *pageJSON {
	lo, hi := w.bounds(total)
	p := &pageJSON{Total: total, Offset: max(w.offset, 0)}
	if w.limit >= 0 {
		limit := w.limit
		p.Limit = &limit
	}
	if hi < total && hi > lo {
		p.NextOffset = &hi
	}
	return p
}
